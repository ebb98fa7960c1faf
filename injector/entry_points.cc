// The only symbols libflopscope_inject.so exports (exports.map): the CUDA and NVTX injection
// entry points, the test-only stats hook, and the wrappers of the ways out of a process that skip
// atexit (_exit, _Exit, the exec family, kill of itself). Everything else is hidden.

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

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

namespace flopscope::injector {
namespace {

// `_exit` (Python's os._exit, a child's error path) and exec end the process image without
// running atexit handlers, so Session::OnProcessExit would never deliver what is already
// recorded. Under LD_PRELOAD this library comes first, so these wrappers run that exit path
// (final batch, bounded wait for acks, spool) and then call libc's own. Only in the session's
// own process: a vfork child shares our memory and must not touch it (it has another pid; no
// write happens before the check), a forked child has the injector off (Current() is null).
// glibc's exit() and posix_spawn reach its _exit and execve internally, never through these.
// A failed exec returns with the session stopped: what the process records afterwards is lost.
void LeaveProcess() noexcept {
  Session* session = Session::Current();
  if (session == nullptr || session->identity().pid != static_cast<int64_t>(getpid())) return;
  try {
    Session::OnProcessExit();
  } catch (...) {
    // Leaving regardless: the job's exit must not depend on us.
  }
}

template <typename Function>
Function Next(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

[[noreturn]] void ExitNow(const char* name, int status) {
  LeaveProcess();
  using ExitFunction = void (*)(int);
  static const ExitFunction next = Next<ExitFunction>(name);
  if (next != nullptr) next(status);
  while (true) syscall(SYS_exit_group, status);
}

// Python leaves on an unhandled KeyboardInterrupt (Ctrl-C) by giving SIGINT its default
// disposition and sending it to itself, kill(getpid(), SIGINT), after its own finalisation and
// instead of exit(): no atexit handler runs. A C program re-raising SIGTERM or SIGINT after its
// own clean-up does the same. When `signo` sent to this process will end it (SIGINT or SIGTERM,
// SIG_DFL, not blocked on this thread), the exit path runs first and names the signal. Only in
// the session's own process (LeaveProcess). Our own re-raise uses raise(), never kill().
void BeforeSignallingSelf(pid_t pid, int signo) noexcept {
  if ((signo != SIGINT && signo != SIGTERM) || pid != getpid()) return;
  struct sigaction current = {};
  if (sigaction(signo, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0 ||
      current.sa_handler != SIG_DFL) {
    return;  // a handler runs (ours drains), or it is ignored: the process goes on for now
  }
  sigset_t blocked;
  if (pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, signo) == 1) {
    return;  // another thread may take it, or none: not certainly the end
  }
  Session* session = Session::Current();
  if (session == nullptr || session->identity().pid != static_cast<int64_t>(getpid())) return;
  Session::NameEndSignal(signo);
  LeaveProcess();
}

}  // namespace
}  // namespace flopscope::injector

FLOPSCOPE_EXPORT int kill(pid_t pid, int signo) {
  flopscope::injector::BeforeSignallingSelf(pid, signo);
  using Function = int (*)(pid_t, int);
  static const Function next = flopscope::injector::Next<Function>("kill");
  return next != nullptr ? next(pid, signo) : static_cast<int>(syscall(SYS_kill, pid, signo));
}

FLOPSCOPE_EXPORT void _exit(int status) { flopscope::injector::ExitNow("_exit", status); }
FLOPSCOPE_EXPORT void _Exit(int status) { flopscope::injector::ExitNow("_Exit", status); }

FLOPSCOPE_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  flopscope::injector::LeaveProcess();
  using Function = int (*)(const char*, char* const[], char* const[]);
  static const Function next = flopscope::injector::Next<Function>("execve");
  return next != nullptr ? next(path, argv, envp)
                         : static_cast<int>(syscall(SYS_execve, path, argv, envp));
}

FLOPSCOPE_EXPORT int execv(const char* path, char* const argv[]) {
  return execve(path, argv, environ);
}

FLOPSCOPE_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  flopscope::injector::LeaveProcess();
  using Function = int (*)(const char*, char* const[], char* const[]);
  static const Function next = flopscope::injector::Next<Function>("execvpe");
  if (next == nullptr) return -1;
  return next(file, argv, envp);
}

FLOPSCOPE_EXPORT int execvp(const char* file, char* const argv[]) {
  return execvpe(file, argv, environ);
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
