#pragma once

#include <string_view>

namespace flopscope::injector::cupti {

// Why an API callback is wanted: its correlation id is what CUPTI puts on the GPU activities it
// causes, so every API that can put work on a stream must be hooked to attribute that work.
enum class CallbackRole {
  kIgnore,       // no GPU activity of the kinds traced
  kLaunch,       // kernel launches, every variant (cuLaunchKernel, _ptsz, Ex, Cooperative, ...)
  kGraphLaunch,  // cuGraphLaunch / cudaGraphLaunch: many kernels share one correlation id
  kMemory,       // memcpy / memset entry points
  // cuGraphInstantiate* / cudaGraphInstantiate*: no GPU work, but the graph nodes CUPTI reports
  // as created inside it are the executable graph's copies, not captured work (review D10).
  kGraphInstantiate,
};

// Classifies a driver or runtime API by the name cuptiGetCallbackName gives it ("cuLaunchKernel",
// "cudaLaunchKernel_v7000", "cuMemcpyHtoDAsync_v2_ptsz", ...). Selecting by name rather than by
// a fixed list of callback ids keeps every variant a newer CUDA adds (a new _ptsz or Ex form)
// covered without a code change.
CallbackRole ClassifyApiCallback(std::string_view name);

}  // namespace flopscope::injector::cupti
