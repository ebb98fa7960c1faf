#include "client/job_id_choice.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job_id.h"

namespace flopscope::client {
namespace {

// Characters left for the command part so that the timestamp suffix always fits.
constexpr size_t kTimestampSuffixLength = sizeof("-YYYYmmdd-HHMMSS-4194304") - 1;

std::string_view Basename(std::string_view command) {
  while (!command.empty() && command.back() == '/') command.remove_suffix(1);
  const size_t slash = command.rfind('/');
  return slash == std::string_view::npos ? command : command.substr(slash + 1);
}

}  // namespace

std::string GenerateJobId(std::string_view command, absl::Time now, absl::TimeZone zone,
                          int64_t pid) {
  std::string stem = SanitizeJobId(Basename(command));
  stem.resize(std::min(stem.size(), kMaxJobIdLength - kTimestampSuffixLength));
  std::string id = absl::StrCat(stem, "-", absl::FormatTime("%Y%m%d-%H%M%S", now, zone));
  if (pid > 0) absl::StrAppend(&id, "-", pid);
  return id;
}

absl::StatusOr<JobIdChoice> ChooseJobId(const std::optional<std::string>& flag,
                                        const Environment& env, std::string_view command,
                                        absl::Time now, absl::TimeZone zone, int64_t pid) {
  if (flag.has_value()) {
    if (std::string problem = JobIdProblem(*flag); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--job '", *flag, "': ", problem));
    }
    return JobIdChoice{JobIdChoice::Source::kFlag, *flag, "", true};
  }
  if (std::optional<std::string> own = env.GetNonEmpty("FLOPSCOPE_JOB_ID")) {
    if (std::string problem = JobIdProblem(*own); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("FLOPSCOPE_JOB_ID '", *own, "': ", problem));
    }
    return JobIdChoice{JobIdChoice::Source::kEnvironment, *own, "FLOPSCOPE_JOB_ID", false};
  }
  for (const char* scheduler_variable : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    if (std::optional<std::string> id = env.GetNonEmpty(scheduler_variable)) {
      return JobIdChoice{JobIdChoice::Source::kEnvironment, SanitizeJobId(*id), scheduler_variable,
                         false};
    }
  }
  return JobIdChoice{JobIdChoice::Source::kGenerated, GenerateJobId(command, now, zone, pid), "",
                     true};
}

}  // namespace flopscope::client
