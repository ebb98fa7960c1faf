// Whether a GPU test program can run here (tests/gpu). The tests skip (exit 77) only when the
// machine has no CUDA device at all: no driver installed, or a driver that sees no device. Any
// other answer (a driver too old for this CUDA runtime, a device that fails to initialise) is a
// failure with CUDA's own words, so that `ctest -L gpu` never passes by skipping on a GPU node.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

namespace gpu_test {

enum class DeviceProbe { kReady, kNoDevice, kBroken };

// libcuda.so.1 is the driver's user-space half; the CUDA runtime dlopens it. When it cannot be
// opened there is no driver on this machine, hence no device.
inline bool DriverInstalled() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return false;
  dlclose(driver);
  return true;
}

// Prints one line saying why when the answer is not kReady (stdout for a skip, stderr for a
// failure); `program` prefixes it.
inline DeviceProbe ProbeCudaDevice(const char* program) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) return DeviceProbe::kReady;
  if (status == cudaSuccess || status == cudaErrorNoDevice) {
    std::printf("%s: no CUDA device, skipping\n", program);
    return DeviceProbe::kNoDevice;
  }
  if (status == cudaErrorInsufficientDriver && !DriverInstalled()) {
    std::printf("%s: no CUDA driver installed (libcuda.so.1 not found), skipping\n", program);
    return DeviceProbe::kNoDevice;
  }
  int driver_version = 0;
  int runtime_version = 0;
  cudaDriverGetVersion(&driver_version);
  cudaRuntimeGetVersion(&runtime_version);
  std::fprintf(stderr,
               "%s: a CUDA driver is installed but cudaGetDeviceCount failed: %s (%s); driver "
               "API version %d, runtime %d\n",
               program, cudaGetErrorName(status), cudaGetErrorString(status), driver_version,
               runtime_version);
  return DeviceProbe::kBroken;
}

}  // namespace gpu_test
