#include "client/commands/query_commands.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/commands/kernels_command.h"
#include "client/commands/profile_commands.h"
#include "client/commands/ranks_command.h"
#include "client/connect/daemon_client.h"
#include "client/documents/output_file.h"
#include "client/documents/report_json.h"
#include "client/text/jobs_view.h"
#include "client/text/report_text.h"
#include "common/job_id.h"

namespace flopscope::client {
namespace {

absl::Status CheckFormat(const std::string& format) {
  if (format == "text" || format == "json") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--format '", format, "' is not known (use text or json)"));
}

}  // namespace

absl::Status JobsCommand(const JobsOptions& options) {
  if (absl::Status format = CheckFormat(options.format); !format.ok()) return format;
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<flopscope::v1::ListJobsResponse> jobs = daemon.ListJobs();
  if (!jobs.ok()) return jobs.status();
  const std::string text = options.format == "json" ? RenderJobsJson(*jobs)
                                                    : RenderJobsText(*jobs, absl::LocalTimeZone());
  return WriteOutput("", text);
}

absl::Status RanksCommand(const RanksOptions& options) {
  if (absl::Status format = CheckFormat(options.format); !format.ok()) return format;
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<std::string> listing = RenderRanksListing(daemon, options);
  if (!listing.ok()) return listing.status();
  return WriteOutput("", *listing);
}

absl::Status ReportCommand(const ReportOptions& options) {
  if (options.format != "text" && options.format != "json" && options.format != "csv" &&
      options.format != "html" && options.format != "tree") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format '", options.format, "' is not known (use text, json, csv, html or tree)"));
  }
  if (std::string problem = JobIdProblem(options.job_id); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", options.job_id, "': ", problem));
  }
  flopscope::v1::ReportRequest request;
  request.set_job_id(options.job_id);
  request.set_omit_step_times(true);  // neither the tree nor the kernel list draws them
  for (int rank : options.ranks) {
    if (rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--rank ", rank, ": ranks start at 0"));
    }
    request.add_ranks(rank);
  }
  if (!options.kernels_of.empty()) return KernelsCommand(options, std::move(request));
  const DaemonClient daemon(options.socket, options.tls);
  if (options.format != "tree") {
    absl::StatusOr<std::string> profile = RenderProfileReport(daemon, options);
    if (!profile.ok()) return profile.status();
    return WriteOutput(options.output, *profile);
  }
  if (!options.steps.empty()) {
    // The tree shows whole-run figures per path; a step window is the profile formats' job.
    return absl::InvalidArgumentError(
        "--steps works with --format text, json or csv, not with the tree view");
  }
  absl::StatusOr<flopscope::v1::Report> report = daemon.GetReport(request);
  if (!report.ok()) return report.status();
  return WriteOutput(options.output, RenderReportText(*report));
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return 0;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace flopscope::client
