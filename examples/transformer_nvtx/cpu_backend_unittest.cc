#include "examples/transformer_nvtx/cpu_backend.h"

#include "gtest/gtest.h"

namespace transformer_nvtx {
namespace {

TEST(CpuBackendTest, SmallProductsAreComputedInFull) {
  CpuBackend backend(1000);
  const CpuBackend::Shape shape = backend.Scaled(4, 5, 6);
  EXPECT_EQ(shape.m, 4);
  EXPECT_EQ(shape.n, 5);
  EXPECT_EQ(shape.k, 6);
  backend.Gemm(Precision::kFp32, 4, 5, 6);
  EXPECT_EQ(backend.multiply_adds(), 4 * 5 * 6);
}

TEST(CpuBackendTest, LargeProductsShrinkUnderTheBudgetKeepingTheirAspect) {
  CpuBackend backend(1 << 15);
  const CpuBackend::Shape shape = backend.Scaled(1024, 4096, 256);
  EXPECT_LE(shape.m * shape.n * shape.k, 1 << 15);
  EXPECT_GT(shape.m * shape.n * shape.k, (1 << 15) / 4);  // not shrunk far more than needed
  EXPECT_LT(shape.m, shape.n);
  EXPECT_GT(shape.m, shape.k);
}

TEST(CpuBackendTest, ThinProductsStayAtLeastOneWide) {
  CpuBackend backend(100);
  const CpuBackend::Shape shape = backend.Scaled(1, 1'000'000, 1);
  EXPECT_EQ(shape.m, 1);
  EXPECT_EQ(shape.k, 1);
  EXPECT_LE(shape.n, 100);
  EXPECT_GE(shape.n, 1);
}

TEST(CpuBackendTest, DescribesItselfAsCpu) { EXPECT_EQ(CpuBackend().Describe(), "cpu"); }

}  // namespace
}  // namespace transformer_nvtx
