#pragma once

// `flopscope run` as one command (issue 32 items 1 and 3, docs/design/private-daemon.md): with no
// daemon reachable it starts a private one for the job, runs the job as its child, prints the
// job's report and writes its HTML report, says so when the job recorded no module range, and
// stops the daemon. With a daemon reachable (the node daemon of a cluster), `run` execs the
// command as ExecRun always did.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "client/connect/environment.h"
#include "client/run/private_daemon.h"
#include "client/run/run_command.h"

namespace flopscope::client {

// The body of `flopscope run`; returns its exit status (the job's; 2 for the user's errors), or
// dies of the signal that killed the job. PlanRun, then: ExecRun when --socket was given,
// --no-private-daemon, this process is one rank of a per-rank launch (WORLD_SIZE, SLURM_NTASKS,
// OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1: its ranks would each start a daemon), or the planned
// daemon answers; otherwise the job runs with a private daemon. Should that daemon fail to
// start, the reason is said and the job runs as ExecRun runs it (its records wait in the spool).
int RunCommand(const RunOptions& options, const Environment& env, std::string_view self_exe,
               absl::Time now, absl::TimeZone zone, int64_t pid);

// Whether `env` says this process is one rank of several that a launcher started one by one.
bool LaunchedPerRank(const Environment& env);

// The line `run` prints when a job recorded no module range: the likely cause and the fix.
// `torch`: --torch was on; `command`: the job's command.
std::string NoModuleRangeMessage(const std::string& job_id, bool torch,
                                 const std::vector<std::string>& command);

// For `report`, `ranks` or `export` of `job_id` with no --socket or --server given: when the
// daemon at `socket` does not answer and `flopscope run` kept the job's data (FindKeptRun), a
// private daemon on that data, said on stderr; nullptr otherwise (the command then says the
// daemon is unreachable as before).
std::unique_ptr<PrivateDaemon> ServeKeptRunIfNoDaemon(const std::string& job_id,
                                                      const std::string& socket,
                                                      const Environment& env,
                                                      std::string_view self_exe);

}  // namespace flopscope::client
