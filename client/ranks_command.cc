#include "client/ranks_command.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/job_id.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ListRanksResponse;

absl::StatusOr<ProfileOptions> ProfileOptionsOf(const RanksOptions& options) {
  return ParseProfileOptions(options.peak_tflops, options.precision);
}

}  // namespace

absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(
    const DaemonClient& daemon, const ListRanksResponse& ranks,
    const ProfileOptions& profile_options, const StragglerOptions& straggler_options) {
  const int count = ranks.ranks_size();
  absl::flat_hash_map<int32_t, int> position;  // rank -> index in `ranks`
  for (int i = 0; i < count; ++i) position[ranks.ranks(i).rank()] = i;
  std::vector<Profile> profiles(count);
  std::vector<std::string> problems(count, "the daemon sent no report for it");
  if (count > 0) {
    flopscope::v1::ReportRequest request;
    request.set_job_id(ranks.ranks(0).job_id());
    request.set_omit_step_times(true);  // the listing draws no step's time
    // Each report becomes a profile as it arrives: only one rank's report is held at a time.
    absl::Status status = daemon.GetRankReports(request, [&](flopscope::v1::RankReport answer) {
      auto it = position.find(answer.rank());
      if (it == position.end()) return;  // a rank that joined after the listing
      problems[it->second] = answer.problem();
      if (answer.has_report())
        profiles[it->second] = BuildProfile(answer.report(), profile_options);
    });
    if (!status.ok()) return status;
  }
  std::vector<std::optional<Straggler>> stragglers = FindStragglers(profiles, straggler_options);
  std::vector<RankFigures> figures;
  figures.reserve(profiles.size());
  for (int i = 0; i < count; ++i) {
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
