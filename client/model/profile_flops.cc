#include "client/model/profile_flops.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::Report;

bool IsMeasured(const Figure& figure) { return absl::StartsWith(figure.note, "measured"); }

const PhaseStats* CountedPhase(const Report& report, const std::string& name) {
  for (const PhaseStats& phase : report.phases()) {
    if (phase.name() == name && phase.has_flops()) return &phase;
  }
  return nullptr;
}

void SortLargestFirst(std::vector<PrecisionFlops>& precisions) {
  std::stable_sort(precisions.begin(), precisions.end(),
                   [](const PrecisionFlops& a, const PrecisionFlops& b) {
                     return a.flops != b.flops ? a.flops > b.flops : a.precision < b.precision;
                   });
}

// "0-3,5": ascending ranks with runs joined.
std::string RankList(const std::set<int32_t>& ranks) {
  std::vector<std::string> runs;
  const std::vector<int32_t> sorted(ranks.begin(), ranks.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    while (end + 1 < sorted.size() && sorted[end + 1] == sorted[end] + 1) ++end;
    runs.push_back(end == i ? absl::StrCat(sorted[i]) : absl::StrCat(sorted[i], "-", sorted[end]));
    i = end + 1;
  }
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(runs, ","));
}

std::string StepsOf(const CountedWindow& window) {
  if (window.first_step < 0) return "a window without step marks";
  if (window.first_step == window.last_step) return absl::StrCat("step ", window.first_step);
  return absl::StrCat("steps ", window.first_step, "-", window.last_step);
}

}  // namespace

int CountedRanks(const Report& report) {
  std::set<int32_t> counted;
  for (const flopscope::v1::RankCounterWindow& entry : report.counter_windows()) {
    if (entry.window().status().empty()) counted.insert(entry.rank());
  }
  if (!counted.empty()) return static_cast<int>(counted.size());
  return std::max(report.ranks_size(), 1);
}

std::optional<Precision> PeakPrecisionOf(const std::string& counted_precision) {
  return PeakPrecisionOfCounted(counted_precision);  // one rule, shared with flopscoped --metrics
}

void SetCountedFlops(const ModuleStats& module, int counted_ranks, bool passes, ModuleRow& row) {
  if (!module.has_flops()) return;
  const double ranks = std::max(counted_ranks, 1);
  row.flops = module.flops() / ranks;
  row.all_passes_flops.reset();
  row.bwd_flops.reset();
  if (passes && (module.has_fwd_flops() || module.has_bwd_flops())) {
    // A torch module's backward kernels run under its range too: DeepSpeed's tree is the
    // forward pass (0 for a module counted in backward only).
    row.all_passes_flops = row.flops;
    row.flops = module.fwd_flops() / ranks;
    if (module.has_bwd_flops()) row.bwd_flops = module.bwd_flops() / ranks;
  }
  row.flops_announced = false;
  row.flops_by_precision.clear();
  for (const flopscope::v1::PrecisionFlops& entry : module.flops_by_precision()) {
    row.flops_by_precision.push_back({entry.precision(), entry.flops() / ranks});
  }
  SortLargestFirst(row.flops_by_precision);
  row.counted_steps = module.counted_steps();
  row.counted_kernels = module.counted_kernels();
}

void FillCountedSummary(const Report& report, Profile& profile) {
  profile.counted_ranks = CountedRanks(report);
  std::map<std::string, double> job;
  for (const ModuleRow& row : profile.modules) {
    if (row.depth != 0 && row.path != kUnattributed) continue;
    for (const PrecisionFlops& entry : row.flops_by_precision) job[entry.precision] += entry.flops;
  }
  profile.flops_by_precision.clear();
  for (const auto& [precision, flops] : job)
    profile.flops_by_precision.push_back({precision, flops});
  SortLargestFirst(profile.flops_by_precision);
  profile.counter_windows = CountedWindowsOf(report);
  profile.fp16_convention = report.fp16_convention();
}

void MeasurePhaseFlops(const Report& report, Profile& profile) {
  // Per counted step and GPU, then per micro-batch (Profile::micro_batches).
  const double ranks =
      std::max(profile.counted_ranks, 1) * std::max<double>(profile.micro_batches, 1);
  if (const PhaseStats* forward = CountedPhase(report, kForwardPhase)) {
    profile.fwd_flops_per_gpu = {forward->flops() / ranks, kMeasuredForward};
    profile.fwd_macs_per_gpu = {forward->flops() / ranks / 2, "measured flops / 2"};
  }
  if (const PhaseStats* backward = CountedPhase(report, kBackwardPhase)) {
    profile.bwd_flops_per_gpu = {backward->flops() / ranks, kMeasuredBackward};
  }
}

void EstimateBwdFlops(Profile& profile) {
  if (IsMeasured(profile.bwd_flops_per_gpu)) return;
  const Figure& fwd = profile.fwd_flops_per_gpu;
  profile.bwd_flops_per_gpu =
      fwd.value ? Figure{2 * *fwd.value, kBwdEstimate} : Figure{std::nullopt, fwd.note};
}

void DeriveModuleRates(Profile& profile) {
  for (ModuleRow& row : profile.modules) {
    if (!row.flops) {
      row.flops_per_s = {std::nullopt, "no FLOPs counted"};
    } else if (row.latency_s <= 0) {
      row.flops_per_s = {std::nullopt, "no latency: it ran in counted steps only"};
    } else {
      row.flops_per_s = {*row.flops / row.latency_s, row.flops_announced ? "announced flops" : ""};
    }
  }
}

void CombineCountedFlops(const std::vector<Profile>& ranks, Profile& out) {
  if (ranks.empty()) return;
  std::map<std::string, ModuleRow*> rows;
  for (ModuleRow& row : out.modules) {
    row.flops_by_precision.clear();
    row.counted_steps = 0;
    row.counted_kernels = 0;
    rows[row.path] = &row;
  }
  std::map<std::string, std::map<std::string, double>> by_module;
  std::map<std::string, double> job;
  bool bwd_measured = true;
  std::optional<double> bwd_sum;
  out.counter_windows.clear();
  for (const Profile& rank : ranks) {
    for (const ModuleRow& row : rank.modules) {
      auto found = rows.find(row.path);
      if (found == rows.end()) continue;
      found->second->counted_steps += row.counted_steps;
      found->second->counted_kernels += row.counted_kernels;
      for (const PrecisionFlops& entry : row.flops_by_precision) {
        by_module[row.path][entry.precision] += entry.flops;
      }
    }
    for (const PrecisionFlops& entry : rank.flops_by_precision) job[entry.precision] += entry.flops;
    bwd_measured = bwd_measured && IsMeasured(rank.bwd_flops_per_gpu);
    if (rank.bwd_flops_per_gpu.value) bwd_sum = bwd_sum.value_or(0) + *rank.bwd_flops_per_gpu.value;
    out.counter_windows.insert(out.counter_windows.end(), rank.counter_windows.begin(),
                               rank.counter_windows.end());
  }
  for (auto& [path, precisions] : by_module) {
    ModuleRow& row = *rows[path];
    for (const auto& [precision, flops] : precisions)
      row.flops_by_precision.push_back({precision, flops});
    SortLargestFirst(row.flops_by_precision);
  }
  const double count = static_cast<double>(ranks.size());
  out.flops_by_precision.clear();
  for (const auto& [precision, flops] : job)
    out.flops_by_precision.push_back({precision, flops / count});
  SortLargestFirst(out.flops_by_precision);
  out.bwd_flops_per_gpu =
      bwd_measured && bwd_sum ? Figure{*bwd_sum / count, kMeasuredBackward} : Figure{};
  if (IsMeasured(ranks.front().fwd_flops_per_gpu) && out.fwd_flops_per_gpu.value) {
    out.fwd_flops_per_gpu.note = kMeasuredForward;
  }
}

std::vector<CountedWindow> CountedWindowsOf(const Report& report) {
  std::vector<CountedWindow> windows;
  for (const flopscope::v1::RankCounterWindow& entry : report.counter_windows()) {
    const flopscope::v1::CounterWindowRecord& window = entry.window();
    windows.push_back({entry.rank(), window.first_step(), window.last_step(), window.metric_set(),
                       window.passes(), window.kernels_counted(), window.ranges_unmatched(),
                       window.status()});
  }
  return windows;
}

std::string CountedStepsLine(const std::vector<CountedWindow>& windows) {
  // Windows alike (steps, settings, outcome) are one entry listing their ranks.
  using Key = std::tuple<int64_t, int64_t, std::string, uint32_t, std::string>;
  struct Group {
    std::set<int32_t> ranks;
    uint64_t unmatched = 0;
  };
  std::map<Key, Group> groups;
  for (const CountedWindow& window : windows) {
    Group& group = groups[Key{window.first_step, window.last_step, window.metric_set, window.passes,
                              window.status}];
    group.ranks.insert(window.rank);
    group.unmatched += window.ranges_unmatched;
  }
  std::vector<std::string> parts;
  for (const auto& [key, group] : groups) {
    const auto& [first, last, metric_set, passes, status] = key;
    const std::string where =
        absl::StrCat(StepsOf({0, first, last, "", 0, 0, 0, ""}), " on ", RankList(group.ranks));
    if (!status.empty()) {
      parts.push_back(absl::StrCat(where, " failed: ", status));
      continue;
    }
    parts.push_back(absl::StrCat(where, " (set ", metric_set.empty() ? "-" : metric_set, ", ",
                                 passes, passes == 1 ? " pass, " : " passes, ", group.unmatched,
                                 " unmatched)"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace flopscope::client
