#include "daemon/step_rollup.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"

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
  AddPhases(rank, figures, resolve);
  AddModules(figures, resolve);
}

void StepRollup::AddPhases(int32_t rank, const RankStepFigures& figures, const Resolve& resolve) {
  // This rank's sum per (phase, bucket): paths of one phase name share their steps.
  absl::flat_hash_map<std::pair<int, int64_t>, int64_t> per_bucket;
  for (const PathStepFigures& path : figures.phases) {
    const StepTarget target = resolve(path.sid, path.path_id);
    if (target.phase < 0) continue;
    PhaseSamples& phase = Slot(phases_, target.phase);
    phase.seen = true;
    phase.calls += path.occurrences;
    phase.cpu_time_ns += path.cpu_time_ns;
    for (const BucketSum& sum : path.buckets) per_bucket[{target.phase, sum.bucket}] += sum.cpu_ns;
  }
  for (const auto& [key, ns] : per_bucket) {
    PhaseSamples& phase = phases_[key.first];
    phase.samples.push_back(ns);
    // Buckets are step numbers only where the rank marks steps (else one per occurrence).
    if (figures.steps_marked == 0) continue;
    if (phase.per_step.size() < kMaxPhaseStepTimes) {
      phase.per_step.push_back({rank, key.second, ns});
    } else {
      phase.per_step_truncated = true;
    }
  }
}

void StepRollup::AddModules(const RankStepFigures& figures, const Resolve& resolve) {
  // This rank's sums per (module, step): a restarted rank's sessions add up.
  absl::flat_hash_map<std::pair<int, int64_t>, StepSums> per_step;
  for (const PathStepFigures& path : figures.modules) {
    const StepTarget target = resolve(path.sid, path.path_id);
    if (target.module < 0 || target.phase >= 0) continue;
    ModuleSamples& module = Slot(modules_, target.module);
    module.gpu = module.gpu || path.gpu;
    for (const BucketSum& sum : path.buckets) {
      StepSums& entry = per_step[{target.module, sum.bucket}];
      entry.cpu_ns += sum.cpu_ns;
      entry.busy_ns += sum.busy_ns;
      AddPass(sum.forward, entry.forward);
      AddPass(sum.backward, entry.backward);
    }
  }
  for (const auto& [key, sums] : per_step) {
    ModuleSamples& module = modules_[key.first];
    module.cpu_ns.push_back(sums.cpu_ns);
    module.busy_ns.push_back(sums.busy_ns);
    for (auto [pass, samples] :
         {std::pair{&sums.forward, &module.forward}, std::pair{&sums.backward, &module.backward}}) {
      if (!pass->ran) continue;
      samples->cpu_ns.push_back(pass->cpu_ns);
      samples->busy_ns.push_back(pass->busy_ns);
    }
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
  std::vector<StepTime> per_step = phase.per_step;
  std::sort(per_step.begin(), per_step.end(), [](const StepTime& a, const StepTime& b) {
    return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
  });
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
}

}  // namespace flopscope::daemon
