#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "examples/transformer_nvtx/model_config.h"

namespace transformer_nvtx {

enum class Precision { kFp32, kFp16 };

// Where the model's arithmetic runs. The model calls it with its real shapes; the backend decides
// how much of that work it actually does (the CPU one scales it down, the GPU one does it all).
// Calls come from the training thread only.
class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // C[m×n] = A[m×k] · B[k×n] on the backend's scratch buffers.
  virtual void Gemm(Precision precision, int64_t m, int64_t n, int64_t k) = 0;
  // Copies `rows` rows of `width` values out of a table (an embedding lookup).
  virtual void Gather(int64_t rows, int64_t width) = 0;
  // y += a·x over `count` values (an optimizer update).
  virtual void Axpy(int64_t count) = 0;
  // Waits for queued work (a GPU backend queues; the CPU one is always done).
  virtual void Synchronize() = 0;
  // "cpu" or "gpu:<device name>".
  virtual std::string Describe() const = 0;
  // The multiply-adds Gemm(m, n, k) really performs: m·n·k unless the backend scales it down.
  virtual int64_t MultiplyAdds(int64_t m, int64_t n, int64_t k) const { return m * n * k; }
};

// The GPU backend when this build has CUDA (FLOPSCOPE_EXAMPLE_CUDA), `force_cpu` is false and a
// device is present; else the CPU backend. `largest_operand` is the most elements any one matrix
// of the model holds, so GPU buffers are allocated once, before the first step.
std::unique_ptr<ComputeBackend> MakeComputeBackend(const ModelConfig& config,
                                                   int64_t largest_operand);

}  // namespace transformer_nvtx
