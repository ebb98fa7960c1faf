#pragma once

#include <cstdint>
#include <vector>

#include "examples/transformer_nvtx/compute_backend.h"

namespace transformer_nvtx {

// Naive matrix products on the CPU, scaled so a step of the default model takes a few
// milliseconds: each GEMM's dimensions shrink by a common factor until it is at most
// `max_multiply_adds`, keeping its aspect. Precision is ignored (everything is float).
class CpuBackend final : public ComputeBackend {
 public:
  static constexpr int64_t kDefaultMaxMultiplyAdds = int64_t{1} << 17;

  explicit CpuBackend(int64_t max_multiply_adds = kDefaultMaxMultiplyAdds);

  void Gemm(Precision precision, int64_t m, int64_t n, int64_t k) override;
  void Gather(int64_t rows, int64_t width) override;
  void Axpy(int64_t count) override;
  void Synchronize() override {}
  std::string Describe() const override { return "cpu"; }
  int64_t MultiplyAdds(int64_t m, int64_t n, int64_t k) const override {
    const Shape shape = Scaled(m, n, k);
    return shape.m * shape.n * shape.k;
  }

  struct Shape {
    int64_t m, n, k;
  };
  // The shape actually computed for a requested one (exposed for tests).
  Shape Scaled(int64_t m, int64_t n, int64_t k) const;
  // Multiply-adds done so far.
  int64_t multiply_adds() const { return multiply_adds_; }

 private:
  float* Scratch(std::vector<float>& buffer, int64_t elements);

  int64_t max_multiply_adds_;
  int64_t multiply_adds_ = 0;
  std::vector<float> a_, b_, c_;
  // Read back after every product so the compiler cannot drop the arithmetic.
  volatile float sink_ = 0;
};

}  // namespace transformer_nvtx
