#include "client/ranks_command.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ListRanksResponse;
using flopscope::v1::Report;

// The report of each rank, by position in `ranks`. Workers claim positions from a shared atomic
// counter and each writes only the slot it claimed, so no lock is needed; the joins publish
// the slots to this thread. DaemonClient's stub is safe to call from several threads.
std::vector<absl::StatusOr<Report>> FetchReports(const DaemonClient& daemon,
                                                 const ListRanksResponse& ranks, int parallel) {
  const int count = ranks.ranks_size();
  std::vector<absl::StatusOr<Report>> reports(count, absl::UnknownError("not fetched"));
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      flopscope::v1::ReportRequest request;
      request.set_job_id(ranks.ranks(i).job_id());
      request.add_ranks(ranks.ranks(i).rank());
      reports[i] = daemon.GetReport(request);
    }
  };
  std::vector<std::thread> workers;
  for (int i = 1; i < std::min(parallel, count); ++i) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  return reports;
}

absl::StatusOr<ProfileOptions> ProfileOptionsOf(const RanksOptions& options) {
  return ParseProfileOptions(options.peak_tflops, options.precision);
}

}  // namespace

absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(const DaemonClient& daemon,
                                                          const ListRanksResponse& ranks,
                                                          const ProfileOptions& profile_options,
                                                          const StragglerOptions& straggler_options,
                                                          int parallel_requests) {
  std::vector<absl::StatusOr<Report>> reports =
      FetchReports(daemon, ranks, std::max(parallel_requests, 1));
  std::vector<Profile> profiles;
  std::vector<std::string> problems;
  for (absl::StatusOr<Report>& report : reports) {
    // A rank whose file cannot be read loses its figures, not the listing: that is when the
    // listing is most needed. A daemon that stopped answering fails the command.
    if (!report.ok() &&
        (absl::IsUnavailable(report.status()) || absl::IsDeadlineExceeded(report.status()))) {
      return report.status();
    }
    profiles.push_back(report.ok() ? BuildProfile(*report, profile_options) : Profile{});
    problems.push_back(report.ok() ? "" : std::string(report.status().message()));
  }
  std::vector<std::optional<Straggler>> stragglers = FindStragglers(profiles, straggler_options);
  std::vector<RankFigures> figures;
  figures.reserve(profiles.size());
  for (size_t i = 0; i < profiles.size(); ++i) {
    figures.push_back({std::move(profiles[i]), std::move(stragglers[i]), std::move(problems[i])});
  }
  return figures;
}

absl::StatusOr<std::string> RenderRanksListing(const DaemonClient& daemon,
                                               const RanksOptions& options) {
  if (options.format != "text" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", options.format, "' is not known (use text or json)"));
  }
  if (std::string problem = JobIdProblem(options.job_id); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", options.job_id, "': ", problem));
  }
  if (options.slow_pct < 0) {
    return absl::InvalidArgumentError("--slow-pct must be 0 or more");
  }
  absl::StatusOr<ProfileOptions> profile_options = ProfileOptionsOf(options);
  if (!profile_options.ok()) return profile_options.status();
  absl::StatusOr<ListRanksResponse> ranks = daemon.ListRanks(options.job_id);
  if (!ranks.ok()) return ranks.status();
  for (auto& rank : *ranks->mutable_ranks()) {
    if (rank.job_id().empty()) rank.set_job_id(options.job_id);
  }
  absl::StatusOr<std::vector<RankFigures>> figures =
      FetchRankFigures(daemon, *ranks, *profile_options, {.threshold_pct = options.slow_pct});
  if (!figures.ok()) return figures.status();
  return options.format == "json" ? RenderRanksJson(*ranks, *figures)
                                  : RenderRanksText(*ranks, *figures);
}

}  // namespace flopscope::client
