#pragma once

// The SIGTERM path: a process ended by SIGTERM (a `with Pool()` block terminating its workers, a
// batch system's stop) still delivers, or spools, what it recorded, and still dies of SIGTERM.
// SIGINT (Ctrl-C in a terminal) takes the same path, each signal on its own: what is said below
// of SIGTERM holds for SIGINT, and the process dies of the signal that came first.
//
// Installed once, at session start, and only where SIGTERM's disposition is SIG_DFL: an
// application's own handler, or SIG_IGN, is never replaced, and a handler the application
// installs later replaces ours (theirs wins). The handler itself only writes to an eventfd
// (async-signal-safe). A thread of ours, blocked in read() on it, then runs the drain function
// (the session's exit path, as the _exit wrapper runs it) on a helper thread and waits for it
// at most the bound; then it restores SIG_DFL and raises SIGTERM, so the process ends as it would
// have without us (WTERMSIG == SIGTERM, exit status 143 in a shell), at most the bound later.
//
// Hazards (each one considered here):
//  - SIGTERM may reach any thread not blocking it: the handler runs there and only wakes our
//    thread. Our thread blocks every signal, so an application that sigwait()s for SIGTERM with
//    it blocked in its own threads is not robbed by this thread.
//  - The process runs on for up to the bound after SIGTERM: its threads keep running meanwhile
//    (with SIG_DFL they would have stopped at once). An idle pool worker does nothing then.
//  - A second SIGTERM while the drain runs ends the process at once (SIG_DFL, re-raised from
//    the handler: pending until the handler returns): what the drain had not delivered stays in
//    the spool and the made-counts file, and is counted by the daemon's collector.
//  - fork: the child inherits the handler but not our thread. Session::OnForkChild calls
//    ResetInForkChild, which gives SIGTERM its default back (the injector is off in a forked
//    child); a child made without atfork handlers (vfork, clone) is caught by the handler's pid
//    check and dies as SIG_DFL would. A child that starts a session of its own (a process forked
//    before any session existed, as a forkserver's workers are) installs its own path.
//  - exec and posix_spawn reset a handled signal to SIG_DFL: nothing of ours survives them.
//  - The check of the disposition and the install are two sigaction calls: an application thread
//    installing its own handler between the two would have it replaced (sigaction offers no
//    compare-and-swap). Sessions start at the first NVTX or CUDA call, rarely at that moment.
//  - Nothing here touches the hot path: the install is once per process.

#include <cstdint>

namespace flopscope::injector {

class SigtermDrain {
 public:
  // How long SIGTERM may be held off for the drain, all of it included (the exporter's final
  // cycle, the wait for acknowledgements, the spool). Past it the process dies regardless.
  static constexpr uint32_t kBoundMs = 2000;

  using DrainFunction = void (*)();
  // Installs the SIGTERM path for SIGTERM and for SIGINT, each where its disposition is SIG_DFL,
  // with `drain` run on a thread of ours when one arrives (at most `bound_ms`). True when
  // installed for either. Once per process: later calls return false. Never throws.
  static bool Install(DrainFunction drain, uint32_t bound_ms = kBoundMs) noexcept;

  // For a forked child (pthread_atfork): it has no drain thread, so SIGTERM and SIGINT get their
  // default disposition back where the handler is still ours. Async-signal-safe.
  static void ResetInForkChild() noexcept;

  // The signal being drained (SIGTERM or SIGINT) once one came, else 0: the drain names it.
  static int DrainedSignal() noexcept;
};

}  // namespace flopscope::injector
