// `flopscope prune` (prune_command.h): the request, the daemon's answer as text.
#include "client/commands/prune_command.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/connect/daemon_client.h"
#include "client/text/human_format.h"
#include "client/text/text_table.h"
#include "common/job_id.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

absl::Status BadAge(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--older-than '", text.substr(0, 64), "': ", why,
                                                 " (give an age such as 7d, 12h or 30m)"));
}

}  // namespace

absl::StatusOr<absl::Duration> ParseAge(absl::string_view text) {
  if (text.empty()) return BadAge(text, "expected a number and a unit");
  const char unit = text.back();
  absl::Duration one;
  switch (unit) {
    case 's':
      one = absl::Seconds(1);
      break;
    case 'm':
      one = absl::Minutes(1);
      break;
    case 'h':
      one = absl::Hours(1);
      break;
    case 'd':
      one = absl::Hours(24);
      break;
    case 'w':
      one = absl::Hours(24 * 7);
      break;
    default:
      return BadAge(text, "the unit must be s, m, h, d or w");
  }
  const absl::string_view digits = text.substr(0, text.size() - 1);
  int64_t count = 0;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &count) || count <= 0) {
    return BadAge(text, "expected a positive whole number before the unit");
  }
  if (count > 100'000 * 52) return BadAge(text, "more than 100,000 years");
  return count * one;
}

absl::StatusOr<v1::PruneRequest> MakePruneRequest(const PruneOptions& options) {
  if (options.job_ids.empty() == options.older_than.empty()) {
    return absl::InvalidArgumentError(
        "name the jobs to prune (flopscope prune JOB...) or give --older-than AGE, not both");
  }
  v1::PruneRequest request;
  request.set_dry_run(options.dry_run);
  for (const std::string& job_id : options.job_ids) {
    if (std::string problem = JobIdProblem(job_id); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("job '", job_id, "': ", problem));
    }
    request.add_job_ids(job_id);
  }
  if (!options.older_than.empty()) {
    absl::StatusOr<absl::Duration> age = ParseAge(options.older_than);
    if (!age.ok()) return age.status();
    request.set_older_than_ns(absl::ToInt64Nanoseconds(*age));
  }
  return request;
}

std::string RenderPruneText(const v1::PruneResponse& response, bool dry_run, absl::TimeZone zone) {
  std::string out;
  if (response.jobs_size() == 0) {
    out = dry_run ? "nothing would be pruned\n" : "nothing pruned\n";
  } else {
    out = absl::StrCat(dry_run ? "would prune " : "pruned ", response.jobs_size(), " job(s), ",
                       dry_run ? "freeing " : "freed ", FormatBytes(response.bytes()), " (",
                       response.bytes(), " bytes):\n");
    TextTable table({"job", "ranks", "size", "bytes", "last seen"});
    for (const v1::PrunedJob& job : response.jobs()) {
      table.AddRow({job.job_id(), absl::StrCat(job.ranks()), FormatBytes(job.bytes()),
                    absl::StrCat(job.bytes()), FormatTimestamp(job.last_seen_ns(), zone)});
    }
    absl::StrAppend(&out, table.Render("  "));
  }
  if (response.kept_running_size() > 0) {
    std::vector<std::string> kept;
    for (const std::string& job_id : response.kept_running()) {
      kept.push_back(PrintableForTerminal(job_id));
    }
    absl::StrAppend(&out, "kept, still running: ", absl::StrJoin(kept, ", "), "\n");
  }
  return out;
}

absl::Status PruneCommand(const PruneOptions& options, std::ostream& out) {
  absl::StatusOr<v1::PruneRequest> request = MakePruneRequest(options);
  if (!request.ok()) return request.status();
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<v1::PruneResponse> response = daemon.PruneJobs(*request);
  if (!response.ok()) return response.status();
  out << RenderPruneText(*response, options.dry_run, absl::LocalTimeZone());
  return absl::OkStatus();
}

}  // namespace flopscope::client
