#pragma once

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace transformer_nvtx {

// NVTX the way a framework emits it. Without a tool loaded (no NVTX_INJECTION64_PATH) every call
// is a cheap no-op. NVTX push/pop ranges are per thread and must nest: each helper here is a
// scope guard, so a range is popped on the thread that pushed it, in reverse order, on every path.

// A module range in NVTX's default domain (what PyTorch's emit_nvtx / module hooks produce).
class ScopedModuleRange {
 public:
  explicit ScopedModuleRange(const char* name) { nvtxRangePushA(name); }
  explicit ScopedModuleRange(const std::string& name) : ScopedModuleRange(name.c_str()) {}
  ~ScopedModuleRange() { nvtxRangePop(); }
  ScopedModuleRange(const ScopedModuleRange&) = delete;
  ScopedModuleRange& operator=(const ScopedModuleRange&) = delete;
};

// The "flopscope" domain, where steps, phases and metadata marks go (created once, process-wide;
// NVTX allows creating domains from any thread).
nvtxDomainHandle_t FlopscopeDomain();

// A step or phase range ("step", "forward", "backward", "optimizer") in the flopscope domain.
class ScopedPhaseRange {
 public:
  explicit ScopedPhaseRange(const char* name);
  ~ScopedPhaseRange();
  ScopedPhaseRange(const ScopedPhaseRange&) = delete;
  ScopedPhaseRange& operator=(const ScopedPhaseRange&) = delete;
};

// A `key=value` mark in the flopscope domain (DESIGN: metadata channel).
void AnnounceMetadata(const std::string& key_value);

}  // namespace transformer_nvtx
