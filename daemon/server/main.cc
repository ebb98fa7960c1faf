// flopscoped: the per-node flopscope daemon (DESIGN: The three programs).

#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common/version.h"
#include "daemon/base/cpu_priority.h"
#include "daemon/base/logger.h"
#include "daemon/server/daemon_options.h"
#include "daemon/server/daemon_server.h"

namespace {

// SIGTERM and SIGINT are blocked in every thread (gRPC's inherit the mask) and taken
// synchronously by main with sigwait(): no async-signal-safety hazards in a handler.
sigset_t TerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

// One line on how the CPU priority went; a daemon without the privilege works as before.
void RaisePriority(int nice) {
  flopscope::daemon::CpuPriorityOutcome outcome;
  if (absl::Status s = flopscope::daemon::RaiseCpuPriority(nice, &outcome); !s.ok()) {
    flopscope::daemon::LogWarning("CPU priority: ", s.message());
    return;
  }
  if (!outcome.note.empty()) {
    flopscope::daemon::LogInfo("CPU priority: ", outcome.note,
                               "; while a job keeps every core busy, queries may wait for a core");
    return;
  }
  flopscope::daemon::LogDebug("CPU priority: nice ", outcome.threads_nice,
                              outcome.session_set ? ", its session's too" : "");
}

}  // namespace

int main(int argc, char** argv) {
  using flopscope::daemon::DaemonOptions;
  CLI::App app{
      "flopscoped: the flopscope daemon. Collects what the injector records in every "
      "training process of this node and answers the flopscope client."};
  app.set_version_flag("--version", std::string("flopscoped ") + flopscope::kVersion);
  DaemonOptions options;
  std::string log_level;
  flopscope::daemon::AddDaemonFlags(app, &options, &log_level);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = flopscope::daemon::ResolveDaemonOptions(log_level, &options); !s.ok()) {
    std::fprintf(stderr, "flopscoped: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  flopscope::daemon::SetLogLevel(options.log_level);
  RaisePriority(options.nice);  // before any thread: each inherits it

  const sigset_t signals = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client vanishing mid-write is an error code, not a death

  absl::StatusOr<std::unique_ptr<flopscope::daemon::DaemonServer>> server =
      flopscope::daemon::DaemonServer::Start(options);
  if (!server.ok()) {
    flopscope::daemon::LogError(server.status().message());
    return 1;
  }
  int received = 0;
  sigwait(&signals, &received);
  flopscope::daemon::LogInfo("received ", received == SIGINT ? "SIGINT" : "SIGTERM",
                             ", draining streams");
  (*server)->Shutdown();
  return 0;
}
