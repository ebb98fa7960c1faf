#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/connect/environment.h"

namespace flopscope::client {

// How `flopscope run` names the job its command belongs to.
struct JobIdChoice {
  enum class Source {
    kFlag,         // --job
    kEnvironment,  // FLOPSCOPE_JOB_ID, SLURM_JOB_ID or TORCHELASTIC_RUN_ID was already set
    kGenerated,    // made up from the command and the time
  };
  Source source;
  std::string job_id;
  // The variable the id came from (kEnvironment only).
  std::string variable;
  // FLOPSCOPE_JOB_ID must be exported to the command (the injector reads the environment itself
  // otherwise).
  bool export_to_command;
};

// `<basename of command>-<YYYYmmdd-HHMMSS>-<pid>` in `zone`, sanitized to a valid job id: two
// runs started in the same second differ by their process id (`flopscope run` execs the
// command, so the pid is the job's own). pid 0: no pid part.
std::string GenerateJobId(std::string_view command, absl::Time now, absl::TimeZone zone,
                          int64_t pid = 0);

// --job wins (checked with JobIdProblem: INVALID_ARGUMENT when malformed); else an id the
// environment already gives (FLOPSCOPE_JOB_ID, then SLURM_JOB_ID, TORCHELASTIC_RUN_ID: the order
// the injector uses), else a generated one. Every rank a launcher starts under one `flopscope run`
// inherits the exported id, so they all land in the same job.
absl::StatusOr<JobIdChoice> ChooseJobId(const std::optional<std::string>& flag,
                                        const Environment& env, std::string_view command,
                                        absl::Time now, absl::TimeZone zone, int64_t pid = 0);

// A second run under a job id whose earlier run has finished is kept apart (issue 14 item 8): it
// becomes `<job>.run<N>`, N = 2, 3, ... What the daemon holds of the job, as NumberRun needs it.
struct HeldRun {
  std::string job_id;          // `<job>` or `<job>.run<N>`
  bool live = false;           // some rank of it is connected now
  std::vector<int32_t> ranks;  // ranks it holds
};

// The id this run's records go to, and what to tell the user ("" when it is `job_id` itself).
struct RunNumber {
  std::string job_id;
  std::string notice;
};

// `held`: the daemon's jobs named `job_id` or `job_id.run<N>` (others are ignored). The run joins
// the latest one while it is live (ranks of one run start at different times) or does not yet
// hold `rank` (a late rank; unknown rank: the whole job, as under a launcher); otherwise it is a
// new run, numbered one above the latest. A rank that restarts while others still run stays in
// its run. An id that would pass the length limit stays as it is, said in the notice.
RunNumber NumberRun(const std::string& job_id, std::optional<int32_t> rank,
                    const std::vector<HeldRun>& held);

// The rank the launcher gave this process (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID,
// the injector's order); nullopt when none is set or it is not a number.
std::optional<int32_t> RankFromEnvironment(const Environment& env);

}  // namespace flopscope::client
