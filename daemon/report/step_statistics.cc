#include "daemon/report/step_statistics.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "daemon/store/latency_sketch.h"

namespace flopscope::daemon {

namespace {

// The sum of `bucket` in a path's buckets, kept sorted by bucket. Occurrences come in commit
// order, which follows time closely, so the bucket is nearly always the last one or a new last.
BucketSum& BucketOf(std::vector<BucketSum>& buckets, int64_t bucket) {
  BucketSum fresh;
  fresh.bucket = bucket;
  if (buckets.empty() || buckets.back().bucket < bucket) {
    buckets.push_back(fresh);
    return buckets.back();
  }
  if (buckets.back().bucket == bucket) return buckets.back();
  auto it = std::lower_bound(buckets.begin(), buckets.end(), bucket,
                             [](const BucketSum& sum, int64_t b) { return sum.bucket < b; });
  if (it == buckets.end() || it->bucket != bucket) it = buckets.insert(it, fresh);
  return *it;
}

}  // namespace

uint32_t StepStatistics::SlotOf(int64_t sid, uint64_t path_id) {
  uint32_t& slot = slots_.At(sid, path_id);
  if (slot == kNoSlot) {
    slot = static_cast<uint32_t>(paths_.size());
    paths_.push_back({sid, path_id});
  }
  return slot;
}

void StepStatistics::Reserve(size_t occurrences) {
  if (wants_modules()) modules_.reserve(modules_.size() + occurrences);
}

void StepStatistics::AddPhase(int64_t sid, uint64_t path_id, const RangeOccurrence& occurrence,
                              bool is_step) {
  if (is_step) {
    steps_.push_back({occurrence.start_ns, occurrence.start_ns + occurrence.cpu_ns});
    step_starts_.push_back({occurrence.start_ns, sid});
    const Key key{sid, path_id};
    if (std::find(step_paths_.begin(), step_paths_.end(), key) == step_paths_.end()) {
      step_paths_.push_back(key);
    }
  }
  if (occurrence.counted) {
    counted_moments_.push_back(occurrence.start_ns);
    return;
  }
  phases_.push_back({SlotOf(sid, path_id), occurrence});
}

void StepStatistics::AddModule(int64_t sid, uint64_t path_id, const RangeOccurrence& occurrence) {
  if (occurrence.counted) {
    counted_moments_.push_back(occurrence.start_ns);
    return;
  }
  if (wants_modules()) modules_.push_back({SlotOf(sid, path_id), occurrence});
}

void StepStatistics::AddPass(Pass pass, const RangeOccurrence& occurrence) {
  passes_.push_back({occurrence.start_ns, occurrence.start_ns + occurrence.cpu_ns, pass});
}

Pass StepStatistics::PassAt(int64_t time_ns) const {
  size_t hint = 0;
  return PassAt(time_ns, &hint);
}

Pass StepStatistics::PassAt(int64_t time_ns, size_t* hint) const {
  // The last span starting at or before the moment is the only one that can hold it.
  const int64_t candidate = LastStartingAtOrBefore(passes_, time_ns, hint);
  if (candidate < 0) return Pass::kNone;
  const PassSpan& span = passes_[static_cast<size_t>(candidate)];
  return time_ns <= span.end_ns ? span.pass : Pass::kNone;
}

std::vector<bool> StepStatistics::CountedSteps(const StepIndex& index) const {
  std::vector<bool> counted(static_cast<size_t>(index.size()), false);
  for (int64_t moment : counted_moments_) {
    if (const int64_t step = index.StepAt(moment); step >= 0) counted[step] = true;
  }
  return counted;
}

std::vector<int64_t> StepStatistics::SessionOfSteps(const StepIndex& index) const {
  std::vector<int64_t> sessions(static_cast<size_t>(index.size()), -1);
  size_t hint = 0;
  std::vector<std::pair<int64_t, int64_t>> starts = step_starts_;
  std::sort(starts.begin(), starts.end());
  for (const auto& [start_ns, sid] : starts) {
    const int64_t step = index.StepAt(start_ns, &hint);
    if (step >= 0 && sessions[step] < 0) sessions[step] = sid;
  }
  return sessions;
}

std::vector<bool> StepStatistics::UnfinishedSteps(const StepIndex& index,
                                                  const std::vector<bool>& counted) const {
  const size_t steps = static_cast<size_t>(index.size());
  std::vector<bool> unfinished(steps, false);
  if (steps < 2) return unfinished;
  // The phase paths that ran in each step, the step ranges themselves left out.
  std::vector<std::vector<uint32_t>> phases_in(steps);
  size_t hint = 0;
  for (const Pending& pending : phases_) {
    if (std::find(step_paths_.begin(), step_paths_.end(), paths_[pending.slot]) !=
        step_paths_.end()) {
      continue;
    }
    const int64_t step = index.StepAt(pending.occurrence.start_ns, &hint);
    if (step >= 0) phases_in[step].push_back(pending.slot);
  }
  for (std::vector<uint32_t>& slots : phases_in) {
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  }
  const std::vector<int64_t> sessions = SessionOfSteps(index);
  for (size_t last = 0; last < steps; ++last) {
    const bool last_of_session = last + 1 == steps || sessions[last + 1] != sessions[last];
    if (!last_of_session || counted[last]) continue;
    // What every other uncounted step of the session ran.
    std::optional<std::vector<uint32_t>> every;
    for (size_t step = last; step-- > 0 && sessions[step] == sessions[last];) {
      if (counted[step]) continue;
      if (!every) {
        every = phases_in[step];
        continue;
      }
      std::vector<uint32_t> both;
      std::set_intersection(every->begin(), every->end(), phases_in[step].begin(),
                            phases_in[step].end(), std::back_inserter(both));
      every = std::move(both);
    }
    if (every && !std::includes(phases_in[last].begin(), phases_in[last].end(), every->begin(),
                                every->end())) {
      unfinished[last] = true;
    }
  }
  return unfinished;
}

std::vector<PathStepFigures> StepStatistics::SumPerPath(const std::vector<Pending>& occurrences,
                                                        const StepIndex& index,
                                                        const std::vector<bool>& left_out,
                                                        const RankStepFigures& figures) const {
  std::vector<PathStepFigures> by_slot(paths_.size());
  std::vector<bool> seen(paths_.size(), false);
  const bool has_steps = index.size() > 0;
  // A path that runs in every step has a bucket per step of the window: room for them at its
  // first, so that millions of occurrences do not grow (and copy) the vectors step by step.
  const size_t window_steps = has_steps && figures.first_step <= figures.last_step
                                  ? static_cast<size_t>(figures.last_step - figures.first_step + 1)
                                  : 0;
  int64_t next_lone_bucket = 0;  // without steps, every occurrence is a bucket of its own
  size_t step_hint = 0;
  size_t pass_hint = 0;
  for (const Pending& pending : occurrences) {
    const RangeOccurrence& occurrence = pending.occurrence;
    const int64_t step = has_steps ? index.StepAt(occurrence.start_ns, &step_hint) : -1;
    // Replay-slowed (though not closed in the window), or a step that did not finish.
    if (step >= 0 && left_out[step]) continue;
    const bool in_window = step >= figures.first_step && step <= figures.last_step;
    if (figures.window_requested && !in_window) continue;
    PathStepFigures& path = by_slot[pending.slot];
    seen[pending.slot] = true;
    ++path.occurrences;
    path.cpu_time_ns += occurrence.cpu_ns;
    path.gpu = path.gpu || occurrence.gpu;
    if (has_steps && !in_window) continue;  // the whole run: outside every step
    if (path.buckets.capacity() == 0) path.buckets.reserve(window_steps);
    BucketSum& sum = BucketOf(path.buckets, has_steps ? step : next_lone_bucket++);
    sum.cpu_ns += occurrence.cpu_ns;
    sum.busy_ns += occurrence.busy_ns;
    ++sum.occurrences;
    const Pass pass = PassAt(occurrence.start_ns, &pass_hint);
    if (pass == Pass::kNone) continue;
    PassSum& part = pass == Pass::kForward ? sum.forward : sum.backward;
    part.ran = true;
    part.cpu_ns += occurrence.cpu_ns;
    part.busy_ns += occurrence.busy_ns;
  }
  std::vector<PathStepFigures> out;
  for (size_t slot = 0; slot < by_slot.size(); ++slot) {
    if (!seen[slot]) continue;
    by_slot[slot].sid = paths_[slot].first;
    by_slot[slot].path_id = paths_[slot].second;
    out.push_back(std::move(by_slot[slot]));
  }
  std::sort(out.begin(), out.end(), [](const PathStepFigures& a, const PathStepFigures& b) {
    return a.sid != b.sid ? a.sid < b.sid : a.path_id < b.path_id;
  });
  return out;
}

RankStepFigures StepStatistics::Finish() {
  std::sort(passes_.begin(), passes_.end(),
            [](const PassSpan& a, const PassSpan& b) { return a.start_ns < b.start_ns; });
  const StepIndex index(std::move(steps_));
  const std::vector<bool> counted = CountedSteps(index);
  const std::vector<bool> unfinished = UnfinishedSteps(index, counted);
  std::vector<bool> left_out = counted;
  for (size_t step = 0; step < left_out.size(); ++step) {
    left_out[step] = counted[step] || unfinished[step];
  }
  const std::vector<int64_t> sessions = SessionOfSteps(index);
  RankStepFigures figures;
  figures.steps_marked = index.size();
  figures.window_requested = window_.has_value();
  figures.first_step = window_ ? std::max<int64_t>(window_->first, 0) : 0;
  figures.last_step = index.size() - 1;
  if (window_ && window_->last) figures.last_step = std::min(*window_->last, figures.last_step);
  for (int64_t step = figures.first_step; step <= figures.last_step; ++step) {
    if (counted[step]) {
      figures.counted_steps.push_back(step);
      figures.window_step_ends_ns.push_back(index.at(step).end_ns);
      continue;
    }
    if (unfinished[step]) {
      figures.unfinished_steps.push_back(step);
      continue;
    }
    figures.window_step_ends_ns.push_back(index.at(step).end_ns);
    ++figures.uncounted_steps;
    if (step + 1 < index.size() && sessions[step + 1] == sessions[step]) {
      figures.step_periods_ns.push_back(index.at(step + 1).start_ns - index.at(step).start_ns);
    }
  }
  figures.phases = SumPerPath(phases_, index, left_out, figures);
  if (wants_modules() && index.size() > 0) {
    figures.modules = SumPerPath(modules_, index, left_out, figures);
  }
  phases_.clear();
  modules_.clear();
  paths_.clear();
  slots_.Clear();
  counted_moments_.clear();
  passes_.clear();
  step_starts_.clear();
  step_paths_.clear();
  return figures;
}

SampleSummary Summarize(std::vector<int64_t> samples) {
  SampleSummary summary;
  if (samples.empty()) return summary;
  summary.samples = static_cast<uint32_t>(samples.size());
  const auto [min, max] = std::minmax_element(samples.begin(), samples.end());
  summary.min_ns = *min;
  summary.max_ns = *max;
  summary.median_ns = MedianOf(&samples);
  return summary;
}

}  // namespace flopscope::daemon
