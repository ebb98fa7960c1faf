#include "daemon/report/span_rollup.h"

#include <algorithm>

namespace flopscope::daemon {

void SpanRollup::AddOccurrence(int64_t sid, uint64_t key, const InstanceActivity& activity) {
  if (activity.kernels == 0) return;
  Pending occurrence{activity.path_id, activity.first_start_ns, activity.last_end_ns,
                     activity.busy_ns, true};
  Merge(occurrence, pending_[{sid, key}]);
}

void SpanRollup::Merge(const Pending& from, Pending& to) {
  if (!from.has_kernels) return;
  if (!to.has_kernels) {
    const uint64_t path_id = to.path_id != 0 ? to.path_id : from.path_id;
    to = from;
    to.path_id = path_id;
    return;
  }
  to.first_start_ns = std::min(to.first_start_ns, from.first_start_ns);
  to.last_end_ns = std::max(to.last_end_ns, from.last_end_ns);
  to.busy_ns += from.busy_ns;
}

std::optional<OccurrenceSpan> SpanRollup::AddRange(int64_t sid, uint64_t instance_id,
                                                   uint64_t parent_instance_id, uint64_t path_id) {
  auto it = pending_.find(Key{sid, instance_id});
  if (it == pending_.end()) return std::nullopt;  // no kernel inside this occurrence
  Pending occurrence = it->second;
  pending_.erase(it);
  std::optional<OccurrenceSpan> completed = Complete(sid, path_id, occurrence);
  if (parent_instance_id != 0) {
    Pending child = occurrence;
    child.path_id = 0;  // the parent's path comes from the parent's own event or row
    Merge(child, pending_[Key{sid, parent_instance_id}]);
  }
  return completed;
}

std::optional<OccurrenceSpan> SpanRollup::Complete(int64_t sid, uint64_t path_id,
                                                   const Pending& occurrence) {
  if (path_id == 0 || !occurrence.has_kernels) return std::nullopt;
  PathSpan& total = totals_[Key{sid, path_id}];
  total.sid = sid;
  total.path_id = path_id;
  const int64_t span = occurrence.last_end_ns - occurrence.first_start_ns;
  const int64_t busy = std::min(occurrence.busy_ns, span);
  total.span_ns += span;
  total.busy_ns += busy;
  ++total.occurrences;
  return OccurrenceSpan{sid, path_id, occurrence.first_start_ns, span, busy};
}

std::vector<PathSpan> SpanRollup::Finish(std::vector<OccurrenceSpan>* unclosed) {
  // Occurrences never closed (the process ended inside them, or graph replays, which have no
  // range event): counted on their own path when it is known.
  for (const auto& [key, occurrence] : pending_) {
    std::optional<OccurrenceSpan> completed = Complete(key.first, occurrence.path_id, occurrence);
    if (completed && unclosed != nullptr) unclosed->push_back(*completed);
  }
  pending_.clear();
  std::vector<PathSpan> out;
  out.reserve(totals_.size());
  for (const auto& [key, total] : totals_) out.push_back(total);
  totals_.clear();
  std::sort(out.begin(), out.end(), [](const PathSpan& a, const PathSpan& b) {
    return a.sid != b.sid ? a.sid < b.sid : a.path_id < b.path_id;
  });
  return out;
}

}  // namespace flopscope::daemon
