// The only symbols libflopscope_inject.so exports (exports.map): the CUDA and NVTX injection
// entry points and the test-only stats hook. Everything else is hidden.

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "injector/nvtx_tool.h"
#include "injector/session.h"
#include "injector/test_hooks.h"

#define FLOPSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace flopscope::injector {
namespace {

std::atomic<uint64_t> g_nvtx_inits{0};  // for the test hook only

constexpr const char* kLibraryName = "libflopscope_inject.so";

// Under LD_PRELOAD the constructor runs while the process starts, before any of its threads
// exist, so setenv is safe. Loaded later (dlopen by NVTX or the driver) other threads may be
// reading the environment, and setenv could free what they read: then it does nothing.
bool LoadedByPreload() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, kLibraryName) != nullptr;
}

// Points the CUDA driver and every NVTX instance at this library, unless the user chose another
// tool. No CUDA work, no thread, no socket: a process that never calls NVTX or initialises CUDA
// (a shell between the launcher and the job) pays nothing and opens no session.
__attribute__((constructor)) void OnLibraryLoad() {
  if (!LoadedByPreload()) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OnLibraryLoad), &info) == 0 || info.dli_fname == nullptr) {
    return;
  }
  // Absolute, so that NVTX and the driver still find us after the job changes directory.
  char* absolute = realpath(info.dli_fname, nullptr);
  const char* self = absolute != nullptr ? absolute : info.dli_fname;
  setenv("NVTX_INJECTION64_PATH", self, /*overwrite=*/0);
  setenv("CUDA_INJECTION64_PATH", self, /*overwrite=*/0);
  std::free(absolute);
}

}  // namespace
}  // namespace flopscope::injector

using flopscope::injector::Session;

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library: before the
// job's first context exists, so kernel tracing (injector/cupti) sees every context and launch.
FLOPSCOPE_EXPORT int InitializeInjection(void) {
  Session* session = Session::StartOnce(Session::StartReason::kCudaInit);
  if (session == nullptr) return 0;
  session->OnCudaInitialized();  // the start attached already unless NVTX started the session
  return 1;
}

// Called by each NVTX instance on its first NVTX call (NVTX_INJECTION64_PATH).
FLOPSCOPE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  flopscope::injector::g_nvtx_inits.fetch_add(1, std::memory_order_relaxed);
  // 0 makes this NVTX instance a no-op (e.g. in a forked child, where the injector is off).
  if (Session::StartOnce() == nullptr) return 0;
  return flopscope::injector::InstallNvtxCallbacks(get_export_table);
}

FLOPSCOPE_EXPORT int flopscope_test_get_stats(flopscope_test_stats* out) {
  *out = flopscope_test_stats{};
  out->nvtx_inits = flopscope::injector::g_nvtx_inits.load(std::memory_order_relaxed);
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  try {
    out->session_started = 1;
    out->records_buffered = session->buffers().AppendedTotal();
    if (session->exporter() != nullptr) {
      const auto stats = session->exporter()->stats();
      out->records_exported = stats.records;
      out->batches_exported = stats.batches;
    }
    out->buffer_full_drops = session->losses().Get(flopscope::injector::LossCause::kBufferFull);
    out->bytes_in_use = session->buffers().bytes_in_use();
    out->paths = session->paths().size();
    return 1;
  } catch (...) {
    return 0;
  }
}
