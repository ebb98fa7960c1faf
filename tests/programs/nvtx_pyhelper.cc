// A tiny shared library a Python test loads with ctypes, so that NVTX (and with it the injector's
// session and its dlmopen'ed transport) comes alive inside a Python process that also uses grpcio
// and protobuf.
#include <nvtx3/nvToolsExt.h>

extern "C" {
__attribute__((visibility("default"))) void flopscope_test_push(const char* name) {
  nvtxRangePushA(name);
}
__attribute__((visibility("default"))) void flopscope_test_pop() { nvtxRangePop(); }
}
