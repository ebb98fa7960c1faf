#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/daemon_client.h"
#include "client/query_commands.h"
#include "client/ranks_view.h"

namespace flopscope::client {

// The body of `flopscope ranks JOB`: the daemon's rank list, one report per rank (fetched
// `parallel_requests` at a time: a job of 1024 ranks must list in well under a second), each
// turned into a Profile, and the stragglers among them.

// One RankFigures per rank of `ranks`, in order. A rank whose report fails gets empty figures
// and the reason (RankFigures::problem); UNAVAILABLE or DEADLINE_EXCEEDED fails the whole call.
absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(
    const DaemonClient& daemon, const flopscope::v1::ListRanksResponse& ranks,
    const ProfileOptions& profile_options, const StragglerOptions& straggler_options,
    int parallel_requests = 8);

// The whole listing in options.format (text or json).
absl::StatusOr<std::string> RenderRanksListing(const DaemonClient& daemon,
                                               const RanksOptions& options);

}  // namespace flopscope::client
