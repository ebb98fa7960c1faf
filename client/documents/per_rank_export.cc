// The "per_rank" part of `flopscope report --format json|html`: each rank's own module latencies
// and step times (per_rank_export.h).
#include "client/documents/per_rank_export.h"

#include <algorithm>
#include <map>

#include "common/nvtx_vocabulary.h"

namespace flopscope::client {
namespace {

using flopscope::v1::Report;

constexpr double kNsPerSecond = 1e9;

void OptionalDouble(JsonWriter& json, const std::optional<double>& value) {
  if (value) {
    json.Double(*value);
  } else {
    json.Null();
  }
}

RankLatencies LatenciesOf(int32_t rank, const Profile& profile) {
  RankLatencies latencies{rank, "", {}};
  // Every row of the rank's profile, as the job's profile has them (a container that never ran
  // a range of its own gets its children's time there too).
  for (const ModuleRow& row : profile.modules) latencies.latency_s[row.path] = row.latency_s;
  return latencies;
}

// Median of a non-empty list, the lower middle for an even count (as the daemon's medians).
double LowerMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

ModuleAcrossRanks AcrossRanks(const std::string& path, const std::vector<RankLatencies>& ranks) {
  ModuleAcrossRanks module{path, {}, std::nullopt, std::nullopt, std::nullopt};
  std::vector<double> values;
  double slowest = 0;
  for (const RankLatencies& rank : ranks) {
    auto it = rank.latency_s.find(path);
    if (it == rank.latency_s.end()) {
      module.latency_s.push_back(std::nullopt);
      continue;
    }
    module.latency_s.push_back(it->second);
    if (values.empty() || it->second > slowest) {
      slowest = it->second;
      module.slowest_rank = rank.rank;
    }
    values.push_back(it->second);
  }
  if (values.empty()) return module;
  module.median_s = LowerMedian(values);
  module.spread_s = slowest - *std::min_element(values.begin(), values.end());
  return module;
}

void WriteModules(const Profile& profile, const std::vector<RankLatencies>& ranks,
                  JsonWriter& json) {
  json.Key("modules").BeginArray();
  for (const ModuleAcrossRanks& module : ModulesAcrossRanks(profile, ranks)) {
    json.BeginObject().Key("path").String(module.path).Key("latency_s").BeginArray();
    for (const std::optional<double>& latency : module.latency_s) OptionalDouble(json, latency);
    json.EndArray();
    json.Key("median_s");
    OptionalDouble(json, module.median_s);
    json.Key("spread_s");
    OptionalDouble(json, module.spread_s);
    json.Key("slowest_rank");
    if (module.slowest_rank) {
      json.Int(*module.slowest_rank);
    } else {
      json.Null();
    }
    json.EndObject();
  }
  json.EndArray();
}

// The `step` phase's time per rank and step; the daemon sends them by rank, then step.
void WriteStepTimes(const Report& report, JsonWriter& json) {
  std::map<int32_t, std::vector<const flopscope::v1::PhaseStepTime*>> by_rank;
  bool truncated = false;
  for (const flopscope::v1::PhaseStats& phase : report.phases()) {
    if (phase.name() != kStepRange) continue;
    truncated = phase.per_step_truncated();
    for (const auto& time : phase.per_step()) by_rank[time.rank()].push_back(&time);
  }
  json.Key("step_time_s").BeginArray();
  for (const auto& [rank, times] : by_rank) {
    json.BeginObject().Key("rank").Int(rank).Key("steps").BeginArray();
    for (const auto* time : times) json.Int(time->step());
    json.EndArray().Key("s").BeginArray();
    for (const auto* time : times) json.Double(static_cast<double>(time->ns()) / kNsPerSecond);
    json.EndArray().EndObject();
  }
  json.EndArray();
  json.Key("step_time_truncated").Bool(truncated);
}

}  // namespace

absl::StatusOr<std::vector<RankLatencies>> FetchRankLatencies(
    const DaemonClient& daemon, const flopscope::v1::ReportRequest& request,
    const ProfileOptions& profile_options) {
  std::map<int32_t, RankLatencies> by_rank;
  // Each report becomes latencies as it arrives: only one rank's report is held at a time.
  absl::Status status = daemon.GetRankReports(request, [&](flopscope::v1::RankReport answer) {
    if (!answer.has_report()) {
      by_rank[answer.rank()] = RankLatencies{answer.rank(), answer.problem(), {}};
      return;
    }
    by_rank[answer.rank()] =
        LatenciesOf(answer.rank(), BuildProfile(answer.report(), profile_options));
  });
  if (!status.ok()) return status;
  std::vector<RankLatencies> ranks;
  ranks.reserve(by_rank.size());
  for (auto& [rank, latencies] : by_rank) ranks.push_back(std::move(latencies));
  return ranks;
}

std::vector<ModuleAcrossRanks> ModulesAcrossRanks(const Profile& profile,
                                                  const std::vector<RankLatencies>& ranks) {
  std::vector<ModuleAcrossRanks> modules;
  modules.reserve(profile.modules.size());
  for (const ModuleRow& row : profile.modules) modules.push_back(AcrossRanks(row.path, ranks));
  return modules;
}

void WritePerRankJson(const Profile& profile, const std::vector<RankLatencies>& ranks,
                      const Report& report, JsonWriter& json) {
  json.Key("per_rank").BeginObject().Key("ranks").BeginArray();
  for (const RankLatencies& rank : ranks) {
    json.BeginObject().Key("rank").Int(rank.rank).Key("problem").String(rank.problem).EndObject();
  }
  json.EndArray();
  WriteModules(profile, ranks, json);
  WriteStepTimes(report, json);
  json.EndObject();
}

}  // namespace flopscope::client
