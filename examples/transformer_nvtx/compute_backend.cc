#include "examples/transformer_nvtx/compute_backend.h"

#include <cstdio>

#include "examples/transformer_nvtx/cpu_backend.h"
#ifdef FLOPSCOPE_EXAMPLE_CUDA
#include "examples/transformer_nvtx/cuda_backend.h"
#endif

namespace transformer_nvtx {

std::unique_ptr<ComputeBackend> MakeComputeBackend(const ModelConfig& config,
                                                   int64_t largest_operand) {
#ifdef FLOPSCOPE_EXAMPLE_CUDA
  if (!config.force_cpu) {
    std::string why;
    if (std::unique_ptr<CudaBackend> gpu = CudaBackend::Create(largest_operand, &why)) return gpu;
    std::fprintf(stderr, "transformer_nvtx: no GPU (%s), computing on the CPU\n", why.c_str());
  }
#else
  (void)config;
  (void)largest_operand;
#endif
  return std::make_unique<CpuBackend>();
}

}  // namespace transformer_nvtx
