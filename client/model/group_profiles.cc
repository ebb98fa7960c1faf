#include "client/model/group_profiles.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "client/model/profile_flops.h"

namespace flopscope::client {
namespace {

void AddTo(std::optional<double>& sum, std::optional<double> value) {
  if (value) sum = sum.value_or(0) + *value;
}

void MaxInto(std::optional<double>& most, std::optional<double> value) {
  if (value && (!most || *value > *most)) most = value;
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Where a module new to `rows` goes: after the last descendant of its parent (the end for a new
// top-level module), keeping the depth-first order the detailed profile is printed in.
size_t InsertionPoint(const std::vector<ModuleRow>& rows, const std::string& path) {
  const std::string parent = ParentOf(path);
  if (parent.empty()) return rows.size();
  size_t at = rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].path == parent) {
      at = i + 1;
      while (at < rows.size() && absl::StartsWith(rows[at].path, parent + "/")) ++at;
      break;
    }
  }
  return at;
}

std::vector<ModuleRow> MergeModules(const std::vector<Profile>& ranks) {
  std::vector<ModuleRow> rows;
  for (const Profile& rank : ranks) {
    for (const ModuleRow& row : rank.modules) {
      auto found = std::find_if(rows.begin(), rows.end(),
                                [&](const ModuleRow& r) { return r.path == row.path; });
      if (found == rows.end()) {
        rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(InsertionPoint(rows, row.path)),
                    row);
        continue;
      }
      AddTo(found->params, row.params);
      AddTo(found->macs, row.macs);
      AddTo(found->flops, row.flops);
      AddTo(found->estimated_flops, row.estimated_flops);
      found->flops_announced |= row.flops_announced;
      found->never_ran = found->never_ran && row.never_ran;  // ran on some rank: it ran
      found->container = found->never_ran && (found->container || row.container);
      found->figures_from_children =
          found->never_ran && (found->figures_from_children || row.figures_from_children);
      if (found->inside_compiled.empty() && found->never_ran) {
        found->inside_compiled = row.inside_compiled;
      }
      if (!found->never_ran) found->inside_compiled.clear();
      found->latency_is_gpu |= row.latency_is_gpu;
      // A replica's ranks run in lockstep, so it is as slow as its slowest rank: the max, for the
      // median and for the step extremes alike.
      found->latency_s = std::max(found->latency_s, row.latency_s);
      MaxInto(found->latency_min_s, row.latency_min_s);
      MaxInto(found->latency_max_s, row.latency_max_s);
      found->kernels += row.kernels;
    }
  }
  return rows;
}

// The max over the ranks that know the figure; the first rank's note when none does.
Figure MaxOf(const std::vector<Profile>& ranks, Figure Profile::*figure) {
  Figure out = ranks.front().*figure;
  for (const Profile& rank : ranks) {
    const Figure& value = rank.*figure;
    if (value.value && (!out.value || *value.value > *out.value)) out = value;
  }
  return out;
}

// Sum over the ranks (and mean per GPU) of a figure known on at least one rank.
void SumAndMean(const std::vector<Profile>& ranks, Figure Profile::*figure, Figure& sum,
                Figure& mean) {
  sum = ranks.front().*figure;
  sum.value.reset();
  for (const Profile& rank : ranks) AddTo(sum.value, (rank.*figure).value);
  sum.note = sum.value ? "" : (ranks.front().*figure).note;
  mean = sum;
  if (mean.value) *mean.value /= static_cast<double>(ranks.size());
}

}  // namespace

Profile CombineModelReplica(const std::vector<Profile>& ranks, const ProfileOptions& options,
                            const std::string& scope) {
  if (ranks.empty()) return Profile{};
  Profile out = ranks.front();
  out.scope = scope;
  out.ranks = static_cast<int>(ranks.size());
  out.modules = MergeModules(ranks);
  SumAndMean(ranks, &Profile::params_per_gpu, out.params_of_model, out.params_per_gpu);
  SumAndMean(ranks, &Profile::fwd_flops_per_gpu, out.fwd_flops_of_model, out.fwd_flops_per_gpu);
  Figure macs_sum;
  SumAndMean(ranks, &Profile::fwd_macs_per_gpu, macs_sum, out.fwd_macs_per_gpu);
  CombineCountedFlops(ranks, out);
  out.fwd_latency_s = MaxOf(ranks, &Profile::fwd_latency_s);
  out.bwd_latency_s = MaxOf(ranks, &Profile::bwd_latency_s);
  out.step_latency_s = MaxOf(ranks, &Profile::step_latency_s);
  out.iter_latency_s = MaxOf(ranks, &Profile::iter_latency_s);
  for (const Profile& rank : ranks) {
    if (out.device.empty()) out.device = rank.device;
  }
  DeriveRates(options, out);
  return out;
}

std::vector<ModuleSpread> DataParallelSpread(const std::vector<Profile>& replicas) {
  std::vector<ModuleSpread> rows;
  absl::flat_hash_map<std::string, size_t> index;
  auto add = [&](const std::string& path, uint32_t depth, double latency, int replica) {
    auto [it, added] = index.try_emplace(path, rows.size());
    if (added) rows.push_back({.path = path, .depth = depth, .min_s = latency, .max_s = latency});
    ModuleSpread& row = rows[it->second];
    if (latency > row.max_s || row.slowest < 0) row.slowest = replica;
    row.min_s = std::min(row.min_s, latency);
    row.max_s = std::max(row.max_s, latency);
    row.mean_s += latency;  // a sum until the end
    ++row.replicas;
  };
  for (size_t r = 0; r < replicas.size(); ++r) {
    if (const auto& iter = replicas[r].iter_latency_s.value) {
      add("<iter>", 0, *iter, static_cast<int>(r));
    }
  }
  for (size_t r = 0; r < replicas.size(); ++r) {
    for (const ModuleRow& module : replicas[r].modules) {
      if (module.path == kUnattributed) continue;
      add(module.path, module.depth, module.latency_s, static_cast<int>(r));
    }
  }
  for (ModuleSpread& row : rows) {
    row.mean_s /= row.replicas;
    row.spread_s = row.max_s - row.min_s;
    row.spread_pct = row.mean_s > 0 ? 100 * row.spread_s / row.mean_s : 0;
  }
  return rows;
}

}  // namespace flopscope::client
