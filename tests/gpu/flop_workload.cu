// Kernels of known work inside known ranges, for the FLOP-counter calibration (tests/gpu,
// test_gpu_flops.py). Every step (a `step` range in the `flopscope` NVTX domain) runs:
//
//   Calib/ffma        ffma_kernel: every thread chains kFmaPerThread FP32 FMAs (2 FLOP each)
//   Calib/sgemm       cuBLAS SGEMM, pedantic math (CUDA cores, FP32)          2*M*N*K
//   Calib/hgemm       cublasGemmEx FP16 x FP16 -> FP16, FP32 accumulate       2*M*N*K
//   Calib/bf16gemm    cublasGemmEx BF16 x BF16 -> FP32, FP32 accumulate       2*M*N*K
//   Calib/tf32gemm    cublasGemmEx FP32 with CUBLAS_COMPUTE_32F_FAST_TF32     2*M*N*K
//
// It writes the analytic FLOPs per step of each module and the precision its work should be
// counted under as JSON (argv[1], else stdout). Exits 77 (the tests' "skipped") without a CUDA
// device, 1 when a driver is there but the device check fails (cuda_device_probe.h); NVTX is used
// before that check, so the injector's session starts even then.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_device_probe.h"

namespace {

constexpr int kSkip = 77;
constexpr int kSteps = 5;
constexpr int kFmaBlocks = 1024;
constexpr int kFmaThreads = 256;
constexpr int kFmaPerThread = 4096;
constexpr int kGemmSize = 1024;  // M = N = K

// One dependent chain per thread: the compiler can neither fold nor drop it (the result is
// stored), and the loop's bookkeeping is integer work, so the kernel's FP32 FLOPs are exactly
// 2 * threads * kFmaPerThread.
__global__ void ffma_kernel(float* out, float b, float c) {
  float a = static_cast<float>(threadIdx.x);
#pragma unroll 1
  for (int i = 0; i < kFmaPerThread; ++i) a = fmaf(a, b, c);
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

nvtxDomainHandle_t FlopscopeDomain() {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("flopscope");
  return domain;
}

struct StepRange {
  StepRange() {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = "step";
    nvtxDomainRangePushEx(FlopscopeDomain(), &attributes);
  }
  ~StepRange() { nvtxDomainRangePop(FlopscopeDomain()); }
};

struct Range {
  explicit Range(const char* name) { nvtxRangePushA(name); }
  ~Range() { nvtxRangePop(); }
};

bool Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "flop_workload: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

bool Check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "flop_workload: %s: cuBLAS status %d\n", what, static_cast<int>(status));
  return false;
}

struct Buffers {
  float* ffma_out = nullptr;
  void* a = nullptr;  // kGemmSize^2 elements of up to 4 bytes each
  void* b = nullptr;
  void* c = nullptr;
};

bool Allocate(Buffers* buffers) {
  const size_t gemm_bytes = size_t{kGemmSize} * kGemmSize * sizeof(float);
  return Check(cudaMalloc(&buffers->ffma_out, size_t{kFmaBlocks} * kFmaThreads * sizeof(float)),
               "malloc") &&
         Check(cudaMalloc(&buffers->a, gemm_bytes), "malloc") &&
         Check(cudaMalloc(&buffers->b, gemm_bytes), "malloc") &&
         Check(cudaMalloc(&buffers->c, gemm_bytes), "malloc") &&
         // Small values: no overflow to inf in FP16, whatever the product.
         Check(cudaMemset(buffers->a, 0, gemm_bytes), "memset") &&
         Check(cudaMemset(buffers->b, 0, gemm_bytes), "memset");
}

bool GemmEx(cublasHandle_t handle, const Buffers& buffers, cudaDataType in_type,
            cudaDataType out_type, cublasComputeType_t compute) {
  const float one = 1.0f, zero = 0.0f;
  const int n = kGemmSize;
  return Check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, buffers.a, in_type, n,
                            buffers.b, in_type, n, &zero, buffers.c, out_type, n, compute,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

bool Step(cublasHandle_t handle, const Buffers& buffers) {
  StepRange step;
  Range calib("Calib");
  {
    Range range("ffma");
    ffma_kernel<<<kFmaBlocks, kFmaThreads>>>(buffers.ffma_out, 0.999f, 0.001f);
    if (!Check(cudaGetLastError(), "ffma_kernel")) return false;
  }
  {
    Range range("sgemm");
    const float one = 1.0f, zero = 0.0f;
    const int n = kGemmSize;
    if (!Check(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "math mode") ||
        !Check(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                           static_cast<const float*>(buffers.a), n,
                           static_cast<const float*>(buffers.b), n, &zero,
                           static_cast<float*>(buffers.c), n),
               "cublasSgemm") ||
        !Check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "math mode")) {
      return false;
    }
  }
  {
    Range range("hgemm");
    if (!GemmEx(handle, buffers, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F)) return false;
  }
  {
    Range range("bf16gemm");
    if (!GemmEx(handle, buffers, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F)) return false;
  }
  {
    Range range("tf32gemm");
    if (!GemmEx(handle, buffers, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32)) {
      return false;
    }
  }
  // The step ends when its work has: a counter window closes at the step's pop.
  return Check(cudaDeviceSynchronize(), "step sync");
}

void WriteExpectations(FILE* out) {
  const double gemm = 2.0 * kGemmSize * kGemmSize * kGemmSize;
  const double ffma = 2.0 * kFmaBlocks * kFmaThreads * kFmaPerThread;
  std::fprintf(out, "{\"steps\": %d, \"modules\": [\n", kSteps);
  std::fprintf(out, "  {\"path\": \"Calib/ffma\", \"flops\": %.1f, \"precision\": \"fp32\"},\n",
               ffma);
  std::fprintf(out, "  {\"path\": \"Calib/sgemm\", \"flops\": %.1f, \"precision\": \"fp32\"},\n",
               gemm);
  std::fprintf(out,
               "  {\"path\": \"Calib/hgemm\", \"flops\": %.1f, \"precision\": \"tensor:fp16\"},\n",
               gemm);
  std::fprintf(
      out, "  {\"path\": \"Calib/bf16gemm\", \"flops\": %.1f, \"precision\": \"tensor:bf16\"},\n",
      gemm);
  std::fprintf(
      out, "  {\"path\": \"Calib/tf32gemm\", \"flops\": %.1f, \"precision\": \"tensor:tf32\"}\n",
      gemm);
  std::fprintf(out, "]}\n");
}

}  // namespace

int main(int argc, char** argv) {
  { Range probe("probe"); }  // NVTX first: the injector's session starts even without a GPU
  switch (gpu_test::ProbeCudaDevice("flop_workload")) {
    case gpu_test::DeviceProbe::kReady:
      break;
    case gpu_test::DeviceProbe::kNoDevice:
      return kSkip;
    case gpu_test::DeviceProbe::kBroken:
      return 1;
  }
  Buffers buffers;
  cublasHandle_t handle = nullptr;
  if (!Allocate(&buffers) || !Check(cublasCreate(&handle), "cublasCreate")) return 1;
  bool ok = true;
  for (int step = 0; step < kSteps && ok; ++step) ok = Step(handle, buffers);
  cublasDestroy(handle);
  cudaFree(buffers.ffma_out);
  cudaFree(buffers.a);
  cudaFree(buffers.b);
  cudaFree(buffers.c);
  if (!ok) return 1;
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  if (out == nullptr) return 1;
  WriteExpectations(out);
  if (out != stdout) std::fclose(out);
  return 0;
}
