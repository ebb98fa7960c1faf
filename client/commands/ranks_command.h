#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands/query_commands.h"
#include "client/connect/daemon_client.h"
#include "client/connect/step_window.h"
#include "client/text/ranks_view.h"

namespace flopscope::client {

// The body of `flopscope ranks JOB`: every rank's own report in one request however many ranks
// the job has (GetRankReports streams the reports, each with the rank as ListRanks lists it),
// each report turned into a Profile as it arrives, and the stragglers among them.

// The job's ranks in rank order, and one RankFigures for each. A daemon whose reports do not
// describe their rank (from before RankReport.info) is asked for the list as well.
// Every figure is over the steps `report` takes: `steps` (--steps), else from step 1 (step 0 is
// warm-up), else every step, else the whole run; `steps_note` says which when not asked.
struct RankListing {
  flopscope::v1::ListRanksResponse ranks;
  std::vector<RankFigures> figures;  // parallel to ranks.ranks()
  std::string steps_note;
};
absl::StatusOr<RankListing> FetchRankListing(const DaemonClient& daemon, const std::string& job_id,
                                             const ProfileOptions& profile_options,
                                             const StragglerOptions& straggler_options,
                                             const std::optional<StepWindow>& steps = {});

// One RankFigures per rank of `ranks` (listed before), in order. A rank the daemon could not read
// (or did not answer for) gets empty figures and the reason (RankFigures::problem); a failed
// request fails the whole call.
absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(
    const DaemonClient& daemon, const flopscope::v1::ListRanksResponse& ranks,
    const ProfileOptions& profile_options, const StragglerOptions& straggler_options);

// The whole listing in options.format (text or json).
absl::StatusOr<std::string> RenderRanksListing(const DaemonClient& daemon,
                                               const RanksOptions& options);

}  // namespace flopscope::client
