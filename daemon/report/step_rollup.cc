#include "daemon/report/step_rollup.h"

#include <algorithm>
#include <tuple>

namespace flopscope::daemon {
namespace {

void AddPass(const PassSum& part, PassSum& total) {
  total.ran = total.ran || part.ran;
  total.cpu_ns += part.cpu_ns;
  total.busy_ns += part.busy_ns;
}

void SetLatency(const std::vector<int64_t>& samples, bool gpu, v1::StepLatency* latency) {
  const SampleSummary summary = Summarize(samples);
  latency->set_samples(summary.samples);
  latency->set_median_ns(summary.median_ns);
  latency->set_min_ns(summary.min_ns);
  latency->set_max_ns(summary.max_ns);
  latency->set_gpu(gpu);
}

// Room for `size` samples at a vector's first use; later growth is the vector's own.
void Reserve(std::vector<int64_t>& samples, size_t size) {
  if (samples.capacity() == 0) samples.reserve(size);
}

// The key counted most often, the larger of a tie; 0 for none.
uint32_t MostFrequent(const std::map<uint32_t, uint64_t>& counts) {
  uint32_t found = 0;
  uint64_t most = 0;
  for (const auto& [key, count] : counts) {
    if (count >= most) {
      found = key;
      most = count;
    }
  }
  return found;
}

template <typename T>
T& Slot(std::vector<T>& slots, int index) {
  if (static_cast<size_t>(index) >= slots.size()) slots.resize(static_cast<size_t>(index) + 1);
  return slots[static_cast<size_t>(index)];
}

}  // namespace

void StepRollup::AddRank(int32_t rank, const RankStepFigures& figures, const Resolve& resolve) {
  any_rank_ = true;
  window_requested_ = window_requested_ || figures.window_requested;
  steps_marked_ = std::max(steps_marked_, figures.steps_marked);
  if (figures.first_step <= figures.last_step) {
    first_step_ = window_seen_ ? std::min(first_step_, figures.first_step) : figures.first_step;
    last_step_ = window_seen_ ? std::max(last_step_, figures.last_step) : figures.last_step;
    window_seen_ = true;
  }
  uncounted_steps_ += figures.uncounted_steps;
  counted_in_window_ += figures.counted_steps.size();
  counted_steps_.insert(figures.counted_steps.begin(), figures.counted_steps.end());
  unfinished_steps_.insert(figures.unfinished_steps.begin(), figures.unfinished_steps.end());
  step_periods_ns_.insert(step_periods_ns_.end(), figures.step_periods_ns.begin(),
                          figures.step_periods_ns.end());
  AddPhases(rank, figures, resolve);
  AddModules(figures, resolve);
}

namespace {

// The paths of one target (module or phase) in one rank, merged into one sum per bucket, in
// bucket order, handed to `on_bucket`. Most targets have one path per rank, whose buckets are
// already merged and sorted: those are handed over as they are.
template <typename OnBucket>
void ForEachMergedBucket(const std::vector<const PathStepFigures*>& paths, OnBucket on_bucket) {
  if (paths.size() == 1) {
    for (const BucketSum& sum : paths.front()->buckets) on_bucket(sum);
    return;
  }
  std::vector<BucketSum> all;
  for (const PathStepFigures* path : paths) {
    all.insert(all.end(), path->buckets.begin(), path->buckets.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const BucketSum& a, const BucketSum& b) { return a.bucket < b.bucket; });
  std::vector<BucketSum> merged;
  for (const BucketSum& sum : all) {
    if (merged.empty() || merged.back().bucket != sum.bucket) {
      merged.push_back(sum);
      continue;
    }
    BucketSum& into = merged.back();
    into.cpu_ns += sum.cpu_ns;
    into.busy_ns += sum.busy_ns;
    into.occurrences += sum.occurrences;
    AddPass(sum.forward, into.forward);
    AddPass(sum.backward, into.backward);
  }
  for (const BucketSum& sum : merged) on_bucket(sum);
}

// Groups a rank's paths by the index `target_of` gives them (-1: left out).
template <typename TargetOf>
std::vector<std::vector<const PathStepFigures*>> GroupPaths(
    const std::vector<PathStepFigures>& paths, TargetOf target_of) {
  std::vector<std::vector<const PathStepFigures*>> groups;
  for (const PathStepFigures& path : paths) {
    const int target = target_of(path);
    if (target < 0) continue;
    Slot(groups, target).push_back(&path);
  }
  return groups;
}

}  // namespace

void StepRollup::AddPhases(int32_t rank, const RankStepFigures& figures, const Resolve& resolve) {
  // This rank's sum per (phase, bucket): paths of one phase name share their steps.
  const auto groups = GroupPaths(figures.phases, [&](const PathStepFigures& path) {
    return resolve(path.sid, path.path_id).phase;
  });
  for (size_t index = 0; index < groups.size(); ++index) {
    if (groups[index].empty()) continue;
    PhaseSamples& phase = Slot(phases_, static_cast<int>(index));
    phase.seen = true;
    for (const PathStepFigures* path : groups[index]) {
      phase.calls += path->occurrences;
      phase.cpu_time_ns += path->cpu_time_ns;
    }
    ForEachMergedBucket(groups[index], [&](const BucketSum& sum) {
      phase.samples.push_back(sum.cpu_ns);
      // Buckets are step numbers only where the rank marks steps (else one per occurrence).
      if (figures.steps_marked == 0) return;
      ++phase.occurrences_per_step[sum.occurrences];
      if (!keep_step_times_) return;
      if (phase.per_step.size() < kMaxPhaseStepTimes) {
        phase.per_step.push_back({rank, sum.bucket, sum.cpu_ns});
      } else {
        phase.per_step_truncated = true;
      }
    });
  }
}

void StepRollup::AddModules(const RankStepFigures& figures, const Resolve& resolve) {
  // This rank's sums per (module, step): a restarted rank's sessions add up.
  const auto groups = GroupPaths(figures.modules, [&](const PathStepFigures& path) {
    const StepTarget target = resolve(path.sid, path.path_id);
    return target.phase >= 0 ? -1 : target.module;
  });
  for (size_t index = 0; index < groups.size(); ++index) {
    if (groups[index].empty()) continue;
    ModuleSamples& module = Slot(modules_, static_cast<int>(index));
    size_t buckets = 0;  // this rank's, about every rank's
    for (const PathStepFigures* path : groups[index]) {
      module.gpu = module.gpu || path->gpu;
      buckets = std::max(buckets, path->buckets.size());
    }
    const size_t room = buckets * expected_ranks_;
    Reserve(module.cpu_ns, room);
    Reserve(module.busy_ns, room);
    ForEachMergedBucket(groups[index], [&](const BucketSum& sums) {
      module.cpu_ns.push_back(sums.cpu_ns);
      module.busy_ns.push_back(sums.busy_ns);
      for (auto [pass, samples] : {std::pair{&sums.forward, &module.forward},
                                   std::pair{&sums.backward, &module.backward}}) {
        if (!pass->ran) continue;
        Reserve(samples->cpu_ns, room);
        Reserve(samples->busy_ns, room);
        samples->cpu_ns.push_back(pass->cpu_ns);
        samples->busy_ns.push_back(pass->busy_ns);
      }
    });
  }
}

void StepRollup::FillPhase(int index, v1::PhaseStats* row) const {
  if (static_cast<size_t>(index) >= phases_.size() || !phases_[index].seen) return;
  const PhaseSamples& phase = phases_[index];
  const SampleSummary summary = Summarize(phase.samples);
  row->set_calls(phase.calls);
  row->set_cpu_time_ns(phase.cpu_time_ns);
  row->set_min_ns(summary.min_ns);
  row->set_max_ns(summary.max_ns);
  row->set_median_ns(summary.median_ns);
  row->set_occurrences_per_step(MostFrequent(phase.occurrences_per_step));
  std::vector<StepTime> per_step = phase.per_step;
  const auto by_rank_and_step = [](const StepTime& a, const StepTime& b) {
    return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
  };
  // Ranks usually arrive in order, each with its steps in order: then nothing is to sort.
  if (!std::is_sorted(per_step.begin(), per_step.end(), by_rank_and_step)) {
    std::sort(per_step.begin(), per_step.end(), by_rank_and_step);
  }
  for (const StepTime& time : per_step) {
    v1::PhaseStepTime* entry = row->add_per_step();
    entry->set_rank(time.rank);
    entry->set_step(time.step);
    entry->set_ns(time.ns);
  }
  row->set_per_step_truncated(phase.per_step_truncated);
}

void StepRollup::FillModule(int index, v1::ModuleStats* row) const {
  if (!window_requested_ || static_cast<size_t>(index) >= modules_.size()) return;
  const ModuleSamples& module = modules_[index];
  if (module.cpu_ns.empty()) return;
  SetLatency(module.gpu ? module.busy_ns : module.cpu_ns, module.gpu, row->mutable_step_latency());
  if (!module.forward.cpu_ns.empty()) {
    SetLatency(module.gpu ? module.forward.busy_ns : module.forward.cpu_ns, module.gpu,
               row->mutable_fwd_step_latency());
  }
  if (!module.backward.cpu_ns.empty()) {
    SetLatency(module.gpu ? module.backward.busy_ns : module.backward.cpu_ns, module.gpu,
               row->mutable_bwd_step_latency());
  }
}

void StepRollup::FillWindow(v1::Report* report) const {
  if (!any_rank_ || (steps_marked_ == 0 && !window_requested_)) return;
  v1::StepWindow* window = report->mutable_steps();
  window->set_requested(window_requested_);
  window->set_first_step(first_step_);
  window->set_last_step(last_step_);
  window->set_uncounted_steps(static_cast<uint32_t>(uncounted_steps_));
  for (int64_t step : counted_steps_) window->add_counted_steps(step);
  for (int64_t step : unfinished_steps_) window->add_unfinished_steps(step);
  if (!step_periods_ns_.empty()) SetLatency(step_periods_ns_, false, window->mutable_step_period());
}

}  // namespace flopscope::daemon
