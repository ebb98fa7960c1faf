#include "client/run/job_id_choice.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

constexpr char kRunSuffix[] = ".run";

// N of `<job>.run<N>` (N >= 2), 1 for `<job>` itself, 0 for any other id.
int RunNumberOf(const std::string& job_id, const std::string& held) {
  if (held == job_id) return 1;
  const std::string prefix = job_id + kRunSuffix;
  int number = 0;
  if (!absl::StartsWith(held, prefix)) return 0;
  const std::string digits = held.substr(prefix.size());
  if (digits.empty() || digits[0] == '0' || !absl::SimpleAtoi(digits, &number)) return 0;
  return number >= 2 ? number : 0;
}

}  // namespace

RunNumber NumberRun(const std::string& job_id, std::optional<int32_t> rank,
                    const std::vector<HeldRun>& held) {
  const HeldRun* latest = nullptr;
  int latest_number = 0;
  for (const HeldRun& run : held) {
    const int number = RunNumberOf(job_id, run.job_id);
    if (number > latest_number) latest_number = number, latest = &run;
  }
  if (latest == nullptr) return {job_id, ""};
  const bool holds_rank =
      !rank || std::find(latest->ranks.begin(), latest->ranks.end(), *rank) != latest->ranks.end();
  if (latest->live || !holds_rank) return {latest->job_id, ""};
  const std::string next = absl::StrCat(job_id, kRunSuffix, latest_number + 1);
  const std::string earlier =
      absl::StrCat("job ", latest->job_id, " has already run",
                   rank ? absl::StrCat(" with rank ", *rank) : std::string(), " and finished");
  if (!JobIdProblem(next).empty()) {
    return {job_id, absl::StrCat("warning: ", earlier, "; this run is merged into it (", next,
                                 " would be too long: give each run its own --job)")};
  }
  return {next, absl::StrCat(earlier, "; this run is job ", next, " (flopscope report ", next,
                             "; give each run its own --job to name it)")};
}

std::optional<int32_t> RankFromEnvironment(const Environment& env) {
  for (const char* variable : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const std::optional<std::string> text = env.GetNonEmpty(variable);
    if (!text) continue;
    int32_t rank = 0;  // the first variable set decides, as in the injector
    return absl::SimpleAtoi(*text, &rank) && rank >= 0 ? std::optional(rank) : std::nullopt;
  }
  return std::nullopt;
}

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
