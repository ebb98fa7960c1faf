#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "examples/transformer_nvtx/compute_backend.h"

namespace transformer_nvtx {

// cuBLAS on device 0: SGEMMs (fp32) and fp16 GEMMs (cublasGemmEx, fp16 in and out, fp32
// accumulation, so tensor cores run) on preallocated buffers, all on one stream. The kernels are
// launched inside the caller's NVTX ranges, which is what attributes them to modules.
class CudaBackend final : public ComputeBackend {
 public:
  // nullptr when no device can be used (no driver, no device, or setup failed); `why` says which.
  static std::unique_ptr<CudaBackend> Create(int64_t largest_operand, std::string* why);
  ~CudaBackend() override;

  void Gemm(Precision precision, int64_t m, int64_t n, int64_t k) override;
  void Gather(int64_t rows, int64_t width) override;
  void Axpy(int64_t count) override;
  void Synchronize() override;
  std::string Describe() const override { return "gpu:" + device_name_; }

 private:
  CudaBackend() = default;
  bool Allocate(int64_t largest_operand, std::string* why);

  std::string device_name_;
  int64_t capacity_ = 0;  // elements in each buffer
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  float* a32_ = nullptr;
  float* b32_ = nullptr;
  float* c32_ = nullptr;
  void* a16_ = nullptr;
  void* b16_ = nullptr;
  void* c16_ = nullptr;
};

}  // namespace transformer_nvtx
