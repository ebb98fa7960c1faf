// Built instead of injector/cupti/ when CMake found no CUPTI: the injector follows NVTX only.
#include "injector/kernel_tracing.h"

namespace flopscope::injector {

std::unique_ptr<KernelTracing> MakeKernelTracing(TraceSink*, const EnvLookup&,
                                                 std::vector<std::string>*,
                                                 std::string* unavailable) {
  *unavailable = "kernel tracing not enabled in this build (no CUPTI): NVTX ranges only";
  return nullptr;
}

}  // namespace flopscope::injector
