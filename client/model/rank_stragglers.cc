#include "client/model/rank_stragglers.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace flopscope::client {
namespace {

using MedianByPath = absl::flat_hash_map<std::string, double>;

// Each module's median latency over the ranks that ran it (pipeline stages run different ones).
MedianByPath ModuleMedians(const std::vector<Profile>& ranks) {
  absl::flat_hash_map<std::string, std::vector<double>> latencies;
  for (const Profile& rank : ranks) {
    for (const ModuleRow& row : rank.modules) latencies[row.path].push_back(row.latency_s);
  }
  MedianByPath medians;
  for (auto& [path, values] : latencies) medians[path] = Median(std::move(values));
  return medians;
}

double ExcessOf(const ModuleRow& row, const MedianByPath& medians) {
  auto median = medians.find(row.path);
  return median == medians.end() ? 0 : row.latency_s - median->second;
}

// The index of the child of modules[parent] (or of a top-level module when parent is npos)
// with the largest excess; npos when there is no child. Modules are in depth-first order, so a
// module's subtree is the run of rows after it that are deeper than it.
size_t LargestChild(const std::vector<ModuleRow>& modules, size_t parent,
                    const MedianByPath& medians) {
  const bool roots = parent == std::string::npos;
  const size_t begin = roots ? 0 : parent + 1;
  const uint32_t child_depth = roots ? 0 : modules[parent].depth + 1;
  size_t best = std::string::npos;
  for (size_t i = begin; i < modules.size(); ++i) {
    if (!roots && modules[i].depth < child_depth) break;
    if (modules[i].depth != child_depth) continue;
    if (best == std::string::npos ||
        ExcessOf(modules[i], medians) > ExcessOf(modules[best], medians)) {
      best = i;
    }
  }
  return best;
}

void BlameModule(const Profile& rank, const MedianByPath& medians, Straggler& straggler) {
  size_t culprit = LargestChild(rank.modules, std::string::npos, medians);
  if (culprit == std::string::npos || ExcessOf(rank.modules[culprit], medians) <= 0) return;
  for (;;) {
    const size_t child = LargestChild(rank.modules, culprit, medians);
    if (child == std::string::npos ||
        ExcessOf(rank.modules[child], medians) < 0.5 * ExcessOf(rank.modules[culprit], medians)) {
      break;
    }
    culprit = child;
  }
  straggler.module = rank.modules[culprit].path;
  straggler.module_excess_s = ExcessOf(rank.modules[culprit], medians);
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  if (values.size() % 2 == 1) return values[middle];
  const double upper = values[middle];
  const double lower = *std::max_element(values.begin(), values.begin() + middle);
  return (lower + upper) / 2;
}

// The measured `step` range (what a slow rank stretches), else DeepSpeed's fwd + bwd + step.
std::optional<double> StepTimeOf(const Profile& rank) {
  if (rank.measured_step_range_s.value) return rank.measured_step_range_s.value;
  if (rank.iter_latency_s.value) return rank.iter_latency_s.value;
  return rank.fwd_latency_s.value;
}

std::vector<std::optional<Straggler>> FindStragglers(const std::vector<Profile>& ranks,
                                                     const StragglerOptions& options) {
  std::vector<std::optional<Straggler>> stragglers(ranks.size());
  std::vector<double> steps;
  for (const Profile& rank : ranks) {
    if (std::optional<double> step = StepTimeOf(rank)) steps.push_back(*step);
  }
  if (steps.size() < 2) return stragglers;
  const double median = Median(std::move(steps));
  if (median <= 0) return stragglers;
  const MedianByPath medians = ModuleMedians(ranks);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::optional<double> step = StepTimeOf(ranks[i]);
    if (!step) continue;
    const double excess_pct = (*step - median) / median * 100;
    if (excess_pct <= options.threshold_pct) continue;
    Straggler straggler;
    straggler.step_s = *step;
    straggler.median_step_s = median;
    straggler.excess_pct = excess_pct;
    BlameModule(ranks[i], medians, straggler);
    stragglers[i] = std::move(straggler);
  }
  return stragglers;
}

}  // namespace flopscope::client
