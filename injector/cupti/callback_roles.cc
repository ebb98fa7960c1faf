#include "injector/cupti/callback_roles.h"

namespace flopscope::injector::cupti {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Launch-family names that put no kernel on a stream.
bool IsHostFunction(std::string_view name) {
  return StartsWith(name, "cuLaunchHostFunc") || StartsWith(name, "cudaLaunchHostFunc");
}

}  // namespace

CallbackRole ClassifyApiCallback(std::string_view name) {
  if (StartsWith(name, "cuGraphLaunch") || StartsWith(name, "cudaGraphLaunch")) {
    return CallbackRole::kGraphLaunch;
  }
  if (StartsWith(name, "cuGraphInstantiate") || StartsWith(name, "cudaGraphInstantiate")) {
    return CallbackRole::kGraphInstantiate;
  }
  if (IsHostFunction(name)) return CallbackRole::kIgnore;
  // Driver: cuLaunch, cuLaunchGrid(Async), cuLaunchKernel(Ex), cuLaunchCooperativeKernel(...);
  // runtime: cudaLaunch, cudaLaunchKernel(ExC), cudaLaunchCooperativeKernel(...).
  if (StartsWith(name, "cuLaunch") || StartsWith(name, "cudaLaunch")) return CallbackRole::kLaunch;
  if (StartsWith(name, "cuMemcpy") || StartsWith(name, "cudaMemcpy") ||
      StartsWith(name, "cuMemset") || StartsWith(name, "cudaMemset")) {
    return CallbackRole::kMemory;
  }
  return CallbackRole::kIgnore;
}

}  // namespace flopscope::injector::cupti
