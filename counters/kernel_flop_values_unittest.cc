#include "counters/kernel_flop_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace flopscope::counters {
namespace {

const std::string kOp = "sm__sass_thread_inst_executed_op_";
const std::string kPred = "_pred_on.sum";

std::string Op(const std::string& op) { return kOp + op + kPred; }

TEST(KernelFlopValuesTest, CudaCoreFormulasPerPrecision) {
  const std::vector<std::string> metrics = {Op("dadd"), Op("dmul"), Op("dfma"),
                                            Op("fadd"), Op("fmul"), Op("ffma"),
                                            Op("hadd"), Op("hmul"), Op("hfma")};
  const std::vector<double> values = {1, 2, 3, 10, 20, 30, 100, 200, 300};
  const KernelFlopValues flops = FlopsFromCounters(metrics, values);
  EXPECT_DOUBLE_EQ(flops.fp64, 1 + 2 + 2 * 3);
  EXPECT_DOUBLE_EQ(flops.fp32, 10 + 20 + 2 * 30);
  EXPECT_DOUBLE_EQ(flops.fp16, 2 * 100 + 2 * 200 + 4 * 300);
  EXPECT_TRUE(flops.tensor.empty());
  EXPECT_DOUBLE_EQ(flops.total(), 9 + 90 + 1800);
}

TEST(KernelFlopValuesTest, Gb100PackedFp32AddsToFp32) {
  const KernelFlopValues flops =
      FlopsFromCounters({Op("ffma"), Op("fadd2"), Op("fmul2"), Op("ffma2")}, {5, 7, 11, 13});
  EXPECT_DOUBLE_EQ(flops.fp32, 2 * 5 + 2 * 7 + 2 * 11 + 4 * 13);
  EXPECT_DOUBLE_EQ(flops.fp16, 0);
  EXPECT_DOUBLE_EQ(flops.fp64, 0);
}

TEST(KernelFlopValuesTest, TensorOpsAreFlopsBySource) {
  const KernelFlopValues flops = FlopsFromCounters(
      {"sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
       "sm__ops_path_tensor_src_int8.sum", "sm__ops_path_tensor_op_hgmma_src_fp16.sum",
       "sm__inst_executed_pipe_tensor_op_gmma.sum"},
      {4096, 8192, 1e9, 4096, 12});
  ASSERT_EQ(flops.tensor.size(), 2u);  // integers, per-family splits and instructions are not
  EXPECT_EQ(flops.tensor[0].first, "fp16");
  EXPECT_DOUBLE_EQ(flops.tensor[0].second, 4096);
  EXPECT_EQ(flops.tensor[1].first, "bf16_dst_fp32");
  EXPECT_DOUBLE_EQ(flops.tensor[1].second, 8192);
  EXPECT_DOUBLE_EQ(flops.total(), 4096 + 8192);
}

TEST(KernelFlopValuesTest, RawKeepsEveryPairInOrder) {
  const std::vector<std::string> metrics = {"gpu__time_duration.sum", Op("ffma"),
                                            "sm__ops_path_tensor_src_fp64.sum", "dram__bytes.sum"};
  const std::vector<double> values = {1500, 64, 256, 1e6};
  const KernelFlopValues flops = FlopsFromCounters(metrics, values);
  ASSERT_EQ(flops.raw.size(), metrics.size());
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(flops.raw[i].first, metrics[i]);
    EXPECT_DOUBLE_EQ(flops.raw[i].second, values[i]);
  }
  EXPECT_DOUBLE_EQ(flops.total(), 2 * 64 + 256);
}

TEST(KernelFlopValuesTest, NonFiniteValuesStayRawButCountNothing) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const KernelFlopValues flops =
      FlopsFromCounters({Op("ffma"), Op("fadd"), "sm__ops_path_tensor_src_fp8.sum"},
                        {nan, 3, std::numeric_limits<double>::infinity()});
  EXPECT_DOUBLE_EQ(flops.fp32, 3);
  EXPECT_TRUE(flops.tensor.empty());
  ASSERT_EQ(flops.raw.size(), 3u);
  EXPECT_TRUE(std::isnan(flops.raw[0].second));
}

TEST(KernelFlopValuesTest, MismatchedListsPairOnlyWhatBothHave) {
  const KernelFlopValues short_values = FlopsFromCounters({Op("fadd"), Op("fmul")}, {4});
  EXPECT_DOUBLE_EQ(short_values.fp32, 4);
  EXPECT_EQ(short_values.raw.size(), 1u);
  const KernelFlopValues short_metrics = FlopsFromCounters({Op("fadd")}, {4, 5, 6});
  EXPECT_DOUBLE_EQ(short_metrics.fp32, 4);
  EXPECT_EQ(short_metrics.raw.size(), 1u);
  EXPECT_DOUBLE_EQ(FlopsFromCounters({}, {}).total(), 0);
}

}  // namespace
}  // namespace flopscope::counters
