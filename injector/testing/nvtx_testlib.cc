// A second DSO with its own copy of the header-only NVTX: its first NVTX call initialises the
// injector a second time (NVTX_INJECTION64_PATH), which must join the same session.
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void testlib_step_begin() {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("flopscope");
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "step";
  nvtxDomainRangePushEx(domain, &attributes);
}

extern "C" __attribute__((visibility("default"))) void testlib_step_end() {
  nvtxDomainRangePop(nvtxDomainCreateA("flopscope"));
}

extern "C" __attribute__((visibility("default"))) void testlib_module(const char* name) {
  nvtxRangePushA(name);
  nvtxRangePop();
}
