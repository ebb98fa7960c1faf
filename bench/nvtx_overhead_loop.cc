// The measured loop of bench/nvtx_overhead. Built twice, as two modules: each copy has its own
// header-only NVTX instance, so one can stay a no-op (initialised while no tool was named) and
// the other can be injected, in the same process and with identical machine code.
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void nvtx_overhead_pairs(long pairs,
                                                                           const char* name) {
  for (long i = 0; i < pairs; ++i) {
    nvtxRangePushA(name);
    nvtxRangePop();
  }
}
