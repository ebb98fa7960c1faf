#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/connect/daemon_client.h"
#include "client/model/profile_model.h"
#include "common/json/json_writer.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// What `flopscope report --format json|html` adds as "per_rank": every rank's own figures over
// the report's steps, for the HTML report's ranks x modules heatmap and step-time chart (and any
// script that looks for stragglers). Each rank's module latency comes from its own profile
// (BuildProfile of its own report, the same rules as the job's: forward latency, median per
// step); its step times are the daemon's `step` phase per rank and step (PhaseStats.per_step).

// One rank's forward latency per module path (seconds per step); a module its report lacks is
// absent. `problem`: why the daemon could not read the rank (then no latencies).
struct RankLatencies {
  int32_t rank = 0;
  std::string problem;
  absl::flat_hash_map<std::string, double> latency_s;
};

// The ranks of `request` (all of the job's when it names none), in rank order, each from its own
// report over request's steps (one GetRankReports call).
absl::StatusOr<std::vector<RankLatencies>> FetchRankLatencies(
    const DaemonClient& daemon, const flopscope::v1::ReportRequest& request,
    const ProfileOptions& profile_options);

// One module of the job's profile across the ranks: latency_s parallel to the ranks (nullopt
// where the rank did not run it); median, spread (max - min) and the slowest rank over the ranks
// that ran it (nullopt when none did; the lowest rank on a tie).
struct ModuleAcrossRanks {
  std::string path;
  std::vector<std::optional<double>> latency_s;
  std::optional<double> median_s;
  std::optional<double> spread_s;
  std::optional<int32_t> slowest_rank;
};

// The job profile's modules (in its order) across `ranks`.
std::vector<ModuleAcrossRanks> ModulesAcrossRanks(const Profile& profile,
                                                  const std::vector<RankLatencies>& ranks);

// "per_rank": {
//   "ranks": [{"rank": n, "problem": ""}],
//   "modules": [{"path": "", "latency_s": [x|null, ...], "median_s": x|null,
//                "spread_s": x|null, "slowest_rank": n|null}],      // profile.modules' order
//   "step_time_s": [{"rank": n, "steps": [n, ...], "s": [x, ...]}],  // uncounted steps
//   "step_time_truncated": bool}
// latency_s is parallel to "ranks"; step times come from the report's `step` phase (seconds).
void WritePerRankJson(const Profile& profile, const std::vector<RankLatencies>& ranks,
                      const flopscope::v1::Report& report, JsonWriter& json);

}  // namespace flopscope::client
