#include "daemon/store/batch_rollup.h"

#include <algorithm>

namespace flopscope::daemon {
namespace {

constexpr uint64_t kGraphOccurrenceBit = uint64_t{1} << 63;
constexpr int kPathBits = 21;  // path ids stay below 2^21 (kMaxPathsPerSession is 2^20)

MemoryTotals* MemoryOf(SelfStats& stats, v1::ActivityKind kind) {
  if (kind == v1::ACTIVITY_KIND_MEMCPY) return &stats.copies;
  if (kind == v1::ACTIVITY_KIND_MEMSET) return &stats.sets;
  return nullptr;
}

}  // namespace

uint64_t OccurrenceKey(const v1::KernelRecord& kernel) {
  if (kernel.kind() == v1::ACTIVITY_KIND_MEMCPY || kernel.kind() == v1::ACTIVITY_KIND_MEMSET) {
    return 0;
  }
  if (kernel.range_instance_id() != 0) return kernel.range_instance_id();
  if (kernel.path_id() == 0 || kernel.graph_id() == 0) return 0;
  const uint64_t correlation = kernel.correlation_id() & 0xFFFFFFFFull;
  return kGraphOccurrenceBit | (correlation << kPathBits) |
         (kernel.path_id() & ((uint64_t{1} << kPathBits) - 1));
}

void BatchRollup::Reset() {
  by_path_.clear();
  by_occurrence_.clear();
  intervals_.clear();
}

void BatchRollup::Add(const v1::RangeEvent& range) {
  if (range.counted()) return;
  SelfStats& stats = by_path_[range.path_id()];
  const int64_t duration = range.end_ns() - range.start_ns();
  stats.min_ns = stats.calls == 0 ? duration : std::min(stats.min_ns, duration);
  stats.max_ns = stats.calls == 0 ? duration : std::max(stats.max_ns, duration);
  ++stats.calls;
  stats.cpu_time_ns += duration;
}

void BatchRollup::Add(const v1::KernelRecord& kernel) {
  if (!kernel.counted()) AddTo(by_path_[kernel.path_id()], kernel);
}

void BatchRollup::AddTo(SelfStats& stats, const v1::KernelRecord& kernel) {
  const int64_t duration = kernel.end_ns() - kernel.start_ns();
  if (MemoryTotals* memory = MemoryOf(stats, kernel.kind())) {
    ++memory->count;
    memory->time_ns += duration;
    memory->bytes += kernel.bytes();
  } else {
    ++stats.kernels;
    stats.gpu_time_ns += duration;
  }
}

void BatchRollup::AddBatch(const v1::Batch& batch) {
  Reset();
  for (const v1::RangeEvent& range : batch.ranges()) Add(range);
  // Kernels arrive in runs that share a path: reuse the entry found for the previous one.
  SelfStats* current = nullptr;
  uint64_t current_path = 0;
  for (const v1::KernelRecord& kernel : batch.kernels()) {
    if (kernel.counted()) continue;
    if (current == nullptr || kernel.path_id() != current_path) {
      current_path = kernel.path_id();
      current = &by_path_[current_path];
    }
    // Safe: no insertion happens between the lookup above and this use of the pointer.
    AddTo(*current, kernel);
    if (const uint64_t key = OccurrenceKey(kernel)) {
      intervals_.push_back({key, kernel.path_id(), kernel.start_ns(), kernel.end_ns()});
    }
  }
  FoldOccurrences();
}

void BatchRollup::FoldOccurrences() {
  // Sorted by occurrence, then start: one sweep gives each occurrence's span and the union of
  // its intervals (kernels of one occurrence may overlap on several streams).
  std::sort(intervals_.begin(), intervals_.end(), [](const Interval& a, const Interval& b) {
    return a.key != b.key ? a.key < b.key : a.start_ns < b.start_ns;
  });
  InstanceActivity* activity = nullptr;
  uint64_t key = 0;
  for (const Interval& interval : intervals_) {
    if (activity == nullptr || interval.key != key) {
      key = interval.key;
      activity = &by_occurrence_[key];
      *activity = InstanceActivity{interval.path_id, 0, interval.start_ns, interval.end_ns, 0};
    }
    // last_end_ns is the end of the union so far: count only what extends it.
    const int64_t covered = activity->kernels == 0 ? interval.start_ns : activity->last_end_ns;
    activity->busy_ns +=
        std::max<int64_t>(0, interval.end_ns - std::max(interval.start_ns, covered));
    activity->last_end_ns = std::max(activity->last_end_ns, interval.end_ns);
    ++activity->kernels;
  }
}

}  // namespace flopscope::daemon
