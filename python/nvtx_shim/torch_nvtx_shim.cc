// libflopscope_torch_nvtx.so: the NVTX calls flopscope_torch makes through ctypes when PyTorch has
// no NVTX of its own (CPU builds), and always for the `flopscope` domain (torch.cuda.nvtx has no
// domains). Built on NVTX v3's header-only implementation, so this library is an NVTX instance of
// its own: its first call reads NVTX_INJECTION64_PATH and hands every later call to the tool
// named there (the flopscope injector, or Nsight Systems). Without a tool each call is one
// indirect call to NVTX's no-op.
//
// Thread hazard: NVTX push/pop ranges belong to the calling thread. Python calls these from
// whichever thread runs the hook (the training thread for forward, the autograd thread for
// backward); the package pairs every push with a pop on the same thread.
#include <nvtx3/nvToolsExt.h>

#define FLOPSCOPE_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// Bumped when a function's meaning or signature changes; the package refuses another version.
constexpr int kShimAbiVersion = 1;

nvtxDomainHandle_t FlopscopeDomain() {
  // A function-local static is initialised once even when threads race to it; NVTX allows
  // creating a domain from any thread.
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("flopscope");
  return domain;
}

nvtxEventAttributes_t AsciiMessage(const char* text) {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = text;
  return attributes;
}

}  // namespace

FLOPSCOPE_SHIM_EXPORT int flopscope_torch_abi_version() { return kShimAbiVersion; }

// A module range in NVTX's default domain.
FLOPSCOPE_SHIM_EXPORT void flopscope_torch_push(const char* name) { nvtxRangePushA(name); }
FLOPSCOPE_SHIM_EXPORT void flopscope_torch_pop() { nvtxRangePop(); }

// A step or phase range in the `flopscope` domain.
FLOPSCOPE_SHIM_EXPORT void flopscope_torch_phase_push(const char* name) {
  const nvtxEventAttributes_t attributes = AsciiMessage(name);
  nvtxDomainRangePushEx(FlopscopeDomain(), &attributes);
}
FLOPSCOPE_SHIM_EXPORT void flopscope_torch_phase_pop() { nvtxDomainRangePop(FlopscopeDomain()); }

// A `key=value` metadata mark in the `flopscope` domain.
FLOPSCOPE_SHIM_EXPORT void flopscope_torch_mark(const char* key_value) {
  const nvtxEventAttributes_t attributes = AsciiMessage(key_value);
  nvtxDomainMarkEx(FlopscopeDomain(), &attributes);
}
