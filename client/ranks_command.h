#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/daemon_client.h"
#include "client/query_commands.h"
#include "client/ranks_view.h"

namespace flopscope::client {

// The body of `flopscope ranks JOB`: the daemon's rank list and every rank's own report, both in
// one request each however many ranks the job has (GetRankReports streams the reports), each
// report turned into a Profile as it arrives, and the stragglers among them.

// One RankFigures per rank of `ranks`, in order. A rank the daemon could not read (or did not
// answer for) gets empty figures and the reason (RankFigures::problem); a failed request fails
// the whole call.
absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(
    const DaemonClient& daemon, const flopscope::v1::ListRanksResponse& ranks,
    const ProfileOptions& profile_options, const StragglerOptions& straggler_options);

// The whole listing in options.format (text or json).
absl::StatusOr<std::string> RenderRanksListing(const DaemonClient& daemon,
                                               const RanksOptions& options);

}  // namespace flopscope::client
