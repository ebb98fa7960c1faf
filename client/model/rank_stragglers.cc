#include "client/model/rank_stragglers.h"

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

namespace flopscope::client {
namespace {

constexpr size_t kNoRow = std::string::npos;

enum class Pass { kForward, kBackward };

// One figure over the ranks that have it, sorted, so that each rank's own value is set against
// the median of the others' (its own never pulls its peers' median towards it): O(log n) a
// rank, where the ranks number thousands.
class PeerValues {
 public:
  void Add(double value) { values_.push_back(value); }
  void Sort() { std::sort(values_.begin(), values_.end()); }
  size_t size() const { return values_.size(); }
  double Median() const { return client::Median(values_); }

  // `value` (one of the values added) less the median of the other values; nullopt when there
  // is no other.
  std::optional<double> ExcessOverOthers(double value) const {
    if (values_.size() < 2) return std::nullopt;
    const size_t others = values_.size() - 1;
    const size_t skipped = static_cast<size_t>(
        std::lower_bound(values_.begin(), values_.end(), value) - values_.begin());
    auto other = [&](size_t i) { return values_[i < skipped ? i : i + 1]; };
    const double median =
        others % 2 == 1 ? other(others / 2) : (other(others / 2 - 1) + other(others / 2)) / 2;
    return value - median;
  }

 private:
  std::vector<double> values_;
};

// A module's latency per step in `pass` (row `index` of `rank`); nullopt where it has none, and
// for the GPU work launched with no module open (no module's own time). With gradient
// accumulation the model's rows are one micro-batch's: times k, per step again.
std::optional<double> PassLatency(const Profile& rank, size_t index, Pass pass) {
  const ModuleRow& row = rank.modules[index];
  if ((row.never_ran && !row.figures_from_children) || row.path == kUnattributed) {
    return std::nullopt;
  }
  const std::optional<double> latency =
      pass == Pass::kForward ? std::optional<double>(row.latency_s) : row.bwd_latency_s;
  if (!latency) return std::nullopt;
  const double per_step = index < rank.model_end ? std::max<uint32_t>(rank.micro_batches, 1) : 1;
  return *latency * per_step;
}

// What each rank does before the collectives, with the step figures, over all ranks.
struct Peers {
  absl::flat_hash_map<std::string, PeerValues> forward;   // by module path
  absl::flat_hash_map<std::string, PeerValues> backward;  // by module path
  PeerValues between_steps;
  PeerValues period;  // the step-to-step period
  PeerValues cycle;   // the period, else the step time (CycleOf)
};

// How often a rank comes round to the next collective: its step-to-step period, else its step.
std::optional<double> CycleOf(const Profile& rank) {
  if (rank.step_scope.step_period_s) return rank.step_scope.step_period_s;
  return StepTimeOf(rank);
}

Peers PeersOf(const std::vector<Profile>& ranks) {
  Peers peers;
  for (const Profile& rank : ranks) {
    for (size_t i = 0; i < rank.modules.size(); ++i) {
      const std::string& path = rank.modules[i].path;
      if (auto forward = PassLatency(rank, i, Pass::kForward)) peers.forward[path].Add(*forward);
      if (auto backward = PassLatency(rank, i, Pass::kBackward)) {
        peers.backward[path].Add(*backward);
      }
    }
    if (auto between = TimeBetweenStepsOf(rank)) peers.between_steps.Add(*between);
    if (rank.step_scope.step_period_s) peers.period.Add(*rank.step_scope.step_period_s);
    if (auto cycle = CycleOf(rank)) peers.cycle.Add(*cycle);
  }
  for (auto* table : {&peers.forward, &peers.backward}) {
    for (auto& [path, values] : *table) values.Sort();
  }
  for (PeerValues* values : {&peers.between_steps, &peers.period, &peers.cycle}) values->Sort();
  return peers;
}

// Each row's latency in `pass` above the other ranks' median for that module (0 where the row
// has no latency in the pass or no other rank ran it).
std::vector<double> RowExcesses(const Profile& rank, Pass pass, const Peers& peers) {
  const auto& table = pass == Pass::kForward ? peers.forward : peers.backward;
  std::vector<double> excess(rank.modules.size(), 0);
  for (size_t i = 0; i < rank.modules.size(); ++i) {
    const std::optional<double> latency = PassLatency(rank, i, pass);
    if (!latency) continue;
    auto values = table.find(rank.modules[i].path);
    if (values != table.end()) excess[i] = values->second.ExcessOverOthers(*latency).value_or(0);
  }
  return excess;
}

// The index of the child of modules[parent] (or of a top-level module when parent is kNoRow)
// with the largest excess; kNoRow when there is no child. Modules are in depth-first order, so a
// module's subtree is the run of rows after it that are deeper than it.
size_t LargestChild(const std::vector<ModuleRow>& modules, size_t parent,
                    const std::vector<double>& excess) {
  const bool roots = parent == kNoRow;
  const size_t begin = roots ? 0 : parent + 1;
  const uint32_t child_depth = roots ? 0 : modules[parent].depth + 1;
  size_t best = kNoRow;
  for (size_t i = begin; i < modules.size(); ++i) {
    if (!roots && modules[i].depth < child_depth) break;
    if (modules[i].depth != child_depth) continue;
    if (best == kNoRow || excess[i] > excess[best]) best = i;
  }
  return best;
}

// Where a rank's extra time went, beyond the other ranks': a pass and its top-level excess, and
// the module that carries it (none between steps).
struct Place {
  StragglerPass pass = StragglerPass::kNone;
  double excess_s = 0;
  std::string module;
  double module_excess_s = 0;
};

// In one pass: the top-level module with the largest excess, then down while one child carries
// at least half of its parent's. kNone when no module is slower than the others'.
Place PlaceInPass(const Profile& rank, Pass pass, const Peers& peers) {
  const std::vector<double> excess = RowExcesses(rank, pass, peers);
  size_t culprit = LargestChild(rank.modules, kNoRow, excess);
  if (culprit == kNoRow || excess[culprit] <= 0) return {};
  Place place;
  place.pass = pass == Pass::kForward ? StragglerPass::kForward : StragglerPass::kBackward;
  place.excess_s = excess[culprit];
  for (;;) {
    const size_t child = LargestChild(rank.modules, culprit, excess);
    if (child == kNoRow || excess[child] < 0.5 * excess[culprit]) break;
    culprit = child;
  }
  place.module = rank.modules[culprit].path;
  place.module_excess_s = excess[culprit];
  return place;
}

// The place with the largest excess: the forward's, the backward's or (when `between_steps`)
// the time between steps.
Place LargestPlace(const Profile& rank, const Peers& peers, bool between_steps) {
  Place best;
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    Place place = PlaceInPass(rank, pass, peers);
    if (place.pass != StragglerPass::kNone && place.excess_s > best.excess_s) {
      best = std::move(place);
    }
  }
  const std::optional<double> between = TimeBetweenStepsOf(rank);
  if (!between_steps || !between) return best;
  const std::optional<double> excess = peers.between_steps.ExcessOverOthers(*between);
  if (excess && *excess > 0 && *excess > best.excess_s) {
    best = Place{};
    best.pass = StragglerPass::kBetweenSteps;
    best.excess_s = *excess;
  }
  return best;
}

// Whether the others waited for `rank`: its largest excess before the collectives is above
// `threshold_s` and the others kept its pace (its cycle is not longer than theirs by half that
// excess: a rank slower on its own, with no collective, is that much slower per cycle).
std::optional<Place> WaitedFor(const Profile& rank, const Peers& peers, double threshold_s) {
  const std::optional<double> cycle = CycleOf(rank);
  if (!cycle) return std::nullopt;
  Place place = LargestPlace(rank, peers, /*between_steps=*/true);
  if (place.pass == StragglerPass::kNone || place.excess_s <= threshold_s) return std::nullopt;
  const std::optional<double> ahead = peers.cycle.ExcessOverOthers(*cycle);
  if (!ahead || *ahead >= place.excess_s / 2) return std::nullopt;
  return place;
}

// Whether a step `step_excess_s` above the median is the rank's own: not when its period is
// known and it kept the others' (it spent the extra time waiting for another rank).
bool StepIsItsOwn(const Profile& rank, const Peers& peers, double step_excess_s) {
  if (!rank.step_scope.step_period_s) return true;
  const std::optional<double> ahead = peers.period.ExcessOverOthers(*rank.step_scope.step_period_s);
  return !ahead || *ahead >= step_excess_s / 2;
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

std::optional<double> TimeBetweenStepsOf(const Profile& rank) {
  if (!rank.step_scope.step_period_s || !rank.measured_step_range_s.value) return std::nullopt;
  return *rank.step_scope.step_period_s - *rank.measured_step_range_s.value;
}

const char* StragglerPassName(StragglerPass pass) {
  switch (pass) {
    case StragglerPass::kForward:
      return "forward";
    case StragglerPass::kBackward:
      return "backward";
    case StragglerPass::kBetweenSteps:
      return "between steps";
    case StragglerPass::kNone:
      break;
  }
  return "";
}

std::vector<std::optional<Straggler>> FindStragglers(const std::vector<Profile>& ranks,
                                                     const StragglerOptions& options) {
  std::vector<std::optional<Straggler>> stragglers(ranks.size());
  const Peers peers = PeersOf(ranks);
  if (peers.cycle.size() < 2) return stragglers;
  std::vector<double> steps;
  for (const Profile& rank : ranks) {
    if (std::optional<double> step = StepTimeOf(rank)) steps.push_back(*step);
  }
  const double median_step = steps.size() >= 2 ? Median(std::move(steps)) : 0;
  const double waited_threshold_s = options.threshold_pct / 100 * peers.cycle.Median();
  for (size_t i = 0; i < ranks.size(); ++i) {
    Straggler straggler;
    const std::optional<double> step = StepTimeOf(ranks[i]);
    if (step && median_step > 0) {
      straggler.step_s = *step;
      straggler.median_step_s = median_step;
      straggler.excess_pct = (*step - median_step) / median_step * 100;
    }
    if (std::optional<Place> place = WaitedFor(ranks[i], peers, waited_threshold_s)) {
      straggler.cause = StragglerCause::kWaitedFor;
      straggler.pass = place->pass;
      straggler.module = std::move(place->module);
      straggler.module_excess_s = place->module_excess_s;
      straggler.waited_s = place->excess_s;
      stragglers[i] = std::move(straggler);
      continue;
    }
    if (!step || median_step <= 0 || straggler.excess_pct <= options.threshold_pct ||
        !StepIsItsOwn(ranks[i], peers, *step - median_step)) {
      continue;
    }
    Place place = LargestPlace(ranks[i], peers, /*between_steps=*/false);
    straggler.pass = place.pass;
    straggler.module = std::move(place.module);
    straggler.module_excess_s = place.module_excess_s;
    stragglers[i] = std::move(straggler);
  }
  return stragglers;
}

}  // namespace flopscope::client
