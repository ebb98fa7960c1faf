#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/environment.h"

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

}  // namespace flopscope::client
