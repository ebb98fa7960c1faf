#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/environment.h"

namespace flopscope::client {

// `flopscope run [--job ID] [--socket S] [--] CMD ARGS...`
struct RunOptions {
  std::optional<std::string> job_id;
  std::optional<std::string> socket;
  std::vector<std::string> command;
};

// What `run` will execute: the command, the environment it gets and what to tell the user.
struct RunPlan {
  std::vector<std::string> argv;
  Environment environment;
  std::string injector;  // absolute path of libflopscope_inject.so
  std::string socket;    // where the job's injector will send its records
  std::string job_id;
  std::vector<std::string> notices;  // lines for stderr, without the "flopscope: " prefix
};

// Works out the plan without side effects: locates the injector (see LocateInjector), puts it
// first in LD_PRELOAD, exports FLOPSCOPE_SOCKET (--socket, else $FLOPSCOPE_SOCKET, else
// DefaultSocketPath()) and FLOPSCOPE_JOB_ID (see ChooseJobId). Every error is the user's to fix
// (missing injector, malformed job id, no command) and means exit status 2.
absl::StatusOr<RunPlan> PlanRun(const RunOptions& options, const Environment& env,
                                std::string_view self_exe, absl::Time now, absl::TimeZone zone);

// Prints the notices, warns when the daemon does not answer within `probe_timeout` (the job runs
// anyway: its injector buffers until the daemon comes), then replaces this process with the
// command, so its exit status and a death by signal reach the caller unchanged. Returns only when
// the command cannot be started: 127 when it was not found, 126 otherwise (as shells do).
int ExecRun(const RunPlan& plan, absl::Duration probe_timeout = absl::Milliseconds(200));

}  // namespace flopscope::client
