#include "examples/transformer_nvtx/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace transformer_nvtx {
namespace {

// A failed launch mid-run means the device is gone or the shapes are wrong; an example program
// has nothing better to do than say so and stop.
void Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "transformer_nvtx: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

void Check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "transformer_nvtx: %s: cuBLAS status %d\n", what, static_cast<int>(status));
  std::exit(1);
}

int AsInt(int64_t value) { return static_cast<int>(std::min<int64_t>(value, 1 << 30)); }

}  // namespace

std::unique_ptr<CudaBackend> CudaBackend::Create(int64_t largest_operand, std::string* why) {
  int devices = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&devices); status != cudaSuccess) {
    *why = cudaGetErrorString(status);
    return nullptr;
  }
  if (devices == 0) {
    *why = "no CUDA device";
    return nullptr;
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  if (!backend->Allocate(largest_operand, why)) return nullptr;
  return backend;
}

bool CudaBackend::Allocate(int64_t largest_operand, std::string* why) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess || cudaSetDevice(0) != cudaSuccess) {
    *why = "cannot select device 0";
    return false;
  }
  device_name_ = properties.name;
  capacity_ = std::max<int64_t>(1, largest_operand);
  const size_t bytes32 = static_cast<size_t>(capacity_) * sizeof(float);
  const size_t bytes16 = static_cast<size_t>(capacity_) * 2;
  for (auto [buffer, bytes] : {std::pair{reinterpret_cast<void**>(&a32_), bytes32},
                               {reinterpret_cast<void**>(&b32_), bytes32},
                               {reinterpret_cast<void**>(&c32_), bytes32},
                               {&a16_, bytes16},
                               {&b16_, bytes16},
                               {&c16_, bytes16}}) {
    if (cudaMalloc(buffer, bytes) != cudaSuccess || cudaMemset(*buffer, 0, bytes) != cudaSuccess) {
      *why = "cannot allocate device memory";
      return false;
    }
  }
  if (cudaStreamCreate(&stream_) != cudaSuccess ||
      cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) {
    *why = "cannot set up cuBLAS";
    return false;
  }
  return true;
}

CudaBackend::~CudaBackend() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  for (void* buffer : {static_cast<void*>(a32_), static_cast<void*>(b32_), static_cast<void*>(c32_),
                       a16_, b16_, c16_}) {
    if (buffer != nullptr) cudaFree(buffer);
  }
}

void CudaBackend::Gemm(Precision precision, int64_t m, int64_t n, int64_t k) {
  // Column-major cuBLAS computing C(m×n) = A(m×k)·B(k×n); operands never exceed capacity_ since
  // the model sized it from its largest matrix.
  const int rows = AsInt(m), cols = AsInt(n), inner = AsInt(k);
  const float alpha = 1.0f, beta = 0.0f;
  if (precision == Precision::kFp32) {
    Check(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, inner, &alpha, a32_, rows,
                      b32_, inner, &beta, c32_, rows),
          "cublasSgemm");
    return;
  }
  Check(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, inner, &alpha, a16_, CUDA_R_16F,
                     rows, b16_, CUDA_R_16F, inner, &beta, c16_, CUDA_R_16F, rows,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx(fp16)");
}

void CudaBackend::Gather(int64_t rows, int64_t width) {
  const int64_t elements = std::min(capacity_, rows * width);
  Check(cudaMemcpyAsync(c32_, a32_, static_cast<size_t>(elements) * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync");
}

void CudaBackend::Axpy(int64_t count) {
  const float step = -1e-3f;
  Check(cublasSaxpy(cublas_, AsInt(std::min(capacity_, count)), &step, a32_, 1, c32_, 1),
        "cublasSaxpy");
}

void CudaBackend::Synchronize() { Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace transformer_nvtx
