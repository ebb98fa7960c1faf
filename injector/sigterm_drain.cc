// The SIGTERM and SIGINT path (sigterm_drain.h): the async-signal-safe handler, the thread that
// drains on its behalf, and the re-raise that keeps the signal the cause of death.

#include "injector/sigterm_drain.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace flopscope::injector {
namespace {

// Written once by Install before the handler is installed, read by the handler and our thread.
int g_wake_fd = -1;
std::atomic<pid_t> g_owner_pid{0};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_requested{false};  // the first signal came: a second one ends the process
std::atomic<int> g_signal{0};          // the signal being drained (SIGTERM or SIGINT), else 0
SigtermDrain::DrainFunction g_drain = nullptr;
uint32_t g_bound_ms = SigtermDrain::kBoundMs;

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free &&
                  std::atomic<int>::is_always_lock_free,
              "the handler may only use lock-free atomics");

// The signals drained: both end a process whose disposition is the default (kill, a batch
// system's stop, Ctrl-C in a terminal).
constexpr int kSignals[] = {SIGTERM, SIGINT};

// Gives `signo` its default disposition back. Async-signal-safe.
void RestoreDefault(int signo) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, nullptr);
}

// Gives `signo` its default disposition and raises it on this thread. From the handler the
// signal stays pending until the handler returns (it is blocked during it), then ends the
// process. Async-signal-safe.
void DieOf(int signo) {
  RestoreDefault(signo);
  raise(signo);
}

void OnSignal(int signo) {
  const int saved_errno = errno;
  if (getpid() != g_owner_pid.load(std::memory_order_relaxed) ||
      g_requested.exchange(true, std::memory_order_relaxed)) {
    // A child made without fork's handlers (it has no drain thread), or a second signal while
    // the drain runs (Ctrl-C twice): the default disposition, now.
    DieOf(signo);
  } else {
    g_signal.store(signo, std::memory_order_relaxed);
    const uint64_t one = 1;
    if (write(g_wake_fd, &one, sizeof one) != sizeof one) DieOf(signo);
  }
  errno = saved_errno;
}

// Runs the drain on a helper thread and waits for it at most the bound: whatever the drain does
// (a transport still loading, a daemon that does not answer), the process dies of the signal in
// time. The helper is never joined: the process ends around it.
void DrainThenDie() {
  const int signo = g_signal.load(std::memory_order_relaxed);
  const int done_fd = eventfd(0, EFD_CLOEXEC);
  if (done_fd >= 0) {
    try {
      std::thread([done_fd] {
        g_drain();
        const uint64_t one = 1;
        (void)!write(done_fd, &one, sizeof one);
      }).detach();
      pollfd done = {done_fd, POLLIN, 0};
      while (poll(&done, 1, static_cast<int>(g_bound_ms)) < 0 && errno == EINTR) {
      }
    } catch (...) {
      // No thread for the drain: the signal ends the process without it, as before.
    }
  }
  sigset_t ending;
  sigemptyset(&ending);
  sigaddset(&ending, signo);
  pthread_sigmask(SIG_UNBLOCK, &ending, nullptr);
  DieOf(signo);
  // Not reached: the signal with SIG_DFL ends the process. Should it come back, leave as it would.
  while (true) syscall(SYS_exit_group, 128 + signo);
}

void WaitForSignal() {
  pthread_setname_np(pthread_self(), "flopscope-term");
  uint64_t count = 0;
  while (read(g_wake_fd, &count, sizeof count) != sizeof count) {
    if (errno != EINTR) return;  // cannot happen with our own eventfd; then signals are as before
  }
  DrainThenDie();
}

bool HandlerIsOurs(int signo) {
  struct sigaction current = {};
  return sigaction(signo, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) == 0 &&
         current.sa_handler == &OnSignal;
}

// Whether `signal`'s disposition is SIG_DFL: neither the application's handler nor SIG_IGN.
bool IsDefault(int signo) {
  struct sigaction current = {};
  return sigaction(signo, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) == 0 &&
         current.sa_handler == SIG_DFL;
}

// Starts our thread with every signal blocked (it inherits the mask it is created with, so no
// signal can reach it even before its first instruction).
bool StartThread() {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  bool started = true;
  try {
    std::thread(&WaitForSignal).detach();
  } catch (...) {
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return started;
}

}  // namespace

bool SigtermDrain::Install(DrainFunction drain, uint32_t bound_ms) noexcept {
  if (drain == nullptr || g_installed.exchange(true)) return false;
  bool any_default = false;
  for (int signo : kSignals) any_default = any_default || IsDefault(signo);
  if (!any_default) return false;  // the application's own handlers, or SIG_IGN: theirs stay
  g_wake_fd = eventfd(0, EFD_CLOEXEC);
  if (g_wake_fd < 0) return false;
  g_drain = drain;
  g_bound_ms = bound_ms;
  g_owner_pid.store(getpid(), std::memory_order_relaxed);
  if (!StartThread()) {
    close(g_wake_fd);
    g_wake_fd = -1;
    return false;
  }
  struct sigaction ours = {};
  ours.sa_handler = &OnSignal;
  sigemptyset(&ours.sa_mask);
  for (int signo : kSignals) sigaddset(&ours.sa_mask, signo);  // one handler at a time
  ours.sa_flags = SA_RESTART;  // the job's interrupted system calls resume
  bool installed = false;
  for (int signo : kSignals) {
    // Each signal on its own: SIGINT is SIG_IGN in a shell's background job, SIGTERM may be the
    // application's.
    if (IsDefault(signo)) installed = sigaction(signo, &ours, nullptr) == 0 || installed;
  }
  return installed;
}

int SigtermDrain::DrainedSignal() noexcept { return g_signal.load(std::memory_order_relaxed); }

void SigtermDrain::ResetInForkChild() noexcept {
  if (!g_installed.load(std::memory_order_relaxed)) return;
  for (int signo : kSignals) {
    if (HandlerIsOurs(signo)) RestoreDefault(signo);
  }
}

}  // namespace flopscope::injector
