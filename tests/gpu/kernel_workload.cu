// A CUDA program with known kernels in known NVTX ranges, for the GPU tests (tests/gpu) and the
// no-driver check (tests/integration/test_kernels.py).
//
//   Workload/encoder        encoder_kernel x N on stream 0, one memcpy H->D and one memset
//   Workload/decoder/gemm   two cuBLAS SGEMMs (kernels whose names cuBLAS picks)
//   worker.0, worker.1      worker_kernel x N each, on two threads with a stream each
//   Workload/graph_capture  graph_kernel_a and graph_kernel_b captured into a CUDA graph...
//   Workload/graph_replay   ...launched R times here: the kernels belong to graph_capture
//   (no range)              root_kernel x 1
//
// It writes what it launched as JSON (argv[1], else stdout): the CLOCK_REALTIME interval of the
// run and, per kernel name, the range path and count expected. Exits 77 (the tests' "skipped")
// when there is no CUDA device, 1 when a driver is there but the device check fails
// (cuda_device_probe.h); NVTX is used before that check, so the injector starts a session even
// then.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "cuda_device_probe.h"

namespace {

constexpr int kSkip = 77;
constexpr int kLaunchesPerRange = 8;
constexpr int kGraphReplays = 5;
constexpr int kElements = 1 << 16;

__global__ void encoder_kernel(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 0.5f + 1.0f;
}
__global__ void worker_kernel(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 2.0f;
}
__global__ void graph_kernel_a(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 1.5f;
}
__global__ void graph_kernel_b(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] -= 0.25f;
}
__global__ void root_kernel(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = 0.0f;
}

long long RealtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

bool Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "kernel_workload: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

struct Range {
  explicit Range(const char* name) { nvtxRangePushA(name); }
  ~Range() { nvtxRangePop(); }
};

const dim3 kGrid((kElements + 255) / 256), kBlock(256);

bool Encoder(float* device) {
  Range range("encoder");
  std::vector<float> host(kElements, 1.0f);
  if (!Check(cudaMemcpy(device, host.data(), kElements * sizeof(float), cudaMemcpyHostToDevice),
             "memcpy")) {
    return false;
  }
  if (!Check(cudaMemset(device, 0, 1024), "memset")) return false;
  for (int i = 0; i < kLaunchesPerRange; ++i) encoder_kernel<<<kGrid, kBlock>>>(device, kElements);
  return Check(cudaGetLastError(), "encoder_kernel");
}

bool Decoder(float* device) {
  Range decoder("decoder");
  Range gemm("gemm");
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return false;
  const int n = 128;
  const float one = 1.0f, zero = 0.0f;
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) {
    ok = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, device, n, device + n * n, n,
                     &zero, device + 2 * n * n, n) == CUBLAS_STATUS_SUCCESS;
  }
  ok = Check(cudaDeviceSynchronize(), "cublas") && ok;
  cublasDestroy(handle);
  return ok;
}

bool Workers(float* device) {
  bool ok[2] = {false, false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([t, device, &ok] {
      const std::string name = "worker." + std::to_string(t);
      Range range(name.c_str());
      cudaStream_t stream = nullptr;
      if (!Check(cudaStreamCreate(&stream), "stream")) return;
      float* slice = device + t * (kElements / 2);
      for (int i = 0; i < kLaunchesPerRange; ++i) {
        worker_kernel<<<kGrid.x / 2, kBlock, 0, stream>>>(slice, kElements / 2);
      }
      ok[t] = Check(cudaStreamSynchronize(stream), "worker") &&
              Check(cudaStreamDestroy(stream), "destroy");
    });
  }
  for (std::thread& thread : threads) thread.join();
  return ok[0] && ok[1];
}

bool Graph(float* device) {
  cudaStream_t stream = nullptr;
  if (!Check(cudaStreamCreate(&stream), "graph stream")) return false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  {
    Range range("graph_capture");
    if (!Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture"))
      return false;
    graph_kernel_a<<<kGrid, kBlock, 0, stream>>>(device, kElements);
    graph_kernel_b<<<kGrid, kBlock, 0, stream>>>(device, kElements);
    if (!Check(cudaStreamEndCapture(stream, &graph), "end capture")) return false;
    if (!Check(cudaGraphInstantiate(&exec, graph, 0), "instantiate")) return false;
  }
  {
    Range range("graph_replay");
    for (int i = 0; i < kGraphReplays; ++i) {
      if (!Check(cudaGraphLaunch(exec, stream), "graph launch")) return false;
    }
    if (!Check(cudaStreamSynchronize(stream), "graph sync")) return false;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return true;
}

void WriteExpectations(FILE* out, long long start_ns, long long end_ns) {
  std::fprintf(out, "{\"start_ns\": %lld, \"end_ns\": %lld, \"expect\": [\n", start_ns, end_ns);
  std::fprintf(
      out, "  {\"kernel\": \"encoder_kernel\", \"path\": \"Workload/encoder\", \"count\": %d},\n",
      kLaunchesPerRange);
  std::fprintf(out, "  {\"kernel\": \"worker_kernel\", \"path\": \"worker.0\", \"count\": %d},\n",
               kLaunchesPerRange);
  std::fprintf(out, "  {\"kernel\": \"worker_kernel\", \"path\": \"worker.1\", \"count\": %d},\n",
               kLaunchesPerRange);
  std::fprintf(
      out,
      "  {\"kernel\": \"graph_kernel_a\", \"path\": \"Workload/graph_capture\", \"count\": %d},\n",
      kGraphReplays);
  std::fprintf(
      out,
      "  {\"kernel\": \"graph_kernel_b\", \"path\": \"Workload/graph_capture\", \"count\": %d},\n",
      kGraphReplays);
  std::fprintf(out, "  {\"kernel\": \"root_kernel\", \"path\": \"\", \"count\": 1}\n");
  std::fprintf(
      out,
      "], \"cublas_path\": \"Workload/decoder/gemm\", \"memory_path\": \"Workload/encoder\"}\n");
}

}  // namespace

int main(int argc, char** argv) {
  const long long start_ns = RealtimeNs();
  { Range probe("probe"); }  // NVTX first: the injector's session starts even without a GPU
  switch (gpu_test::ProbeCudaDevice("kernel_workload")) {
    case gpu_test::DeviceProbe::kReady:
      break;
    case gpu_test::DeviceProbe::kNoDevice:
      return kSkip;
    case gpu_test::DeviceProbe::kBroken:
      return 1;
  }
  float* device = nullptr;
  if (!Check(cudaMalloc(&device, 4 * kElements * sizeof(float)), "malloc")) return 1;
  bool ok = true;
  {
    Range workload("Workload");
    ok = ok && Encoder(device);
    ok = ok && Decoder(device);
    ok = ok && Graph(device);
  }
  ok = ok && Workers(device);
  root_kernel<<<kGrid, kBlock>>>(device, kElements);
  ok = ok && Check(cudaDeviceSynchronize(), "final sync");
  cudaFree(device);
  const long long end_ns = RealtimeNs();
  if (!ok) return 1;
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  if (out == nullptr) return 1;
  WriteExpectations(out, start_ns, end_ns);
  if (out != stdout) std::fclose(out);
  return 0;
}
