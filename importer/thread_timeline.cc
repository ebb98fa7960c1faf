#include "importer/thread_timeline.h"

#include <algorithm>
#include <numeric>

namespace flopscope::importer {

size_t ThreadTimeline::Add(uint64_t thread, int64_t start_ns, int64_t end_ns) {
  entries_.push_back({thread, start_ns, end_ns, entries_.size()});
  return entries_.size() - 1;
}

std::vector<int64_t> ThreadTimeline::Innermost(const std::vector<Point>& points) const {
  std::vector<Entry> entries = entries_;
  // Stable: entries that start together keep their Add order, the outer one first.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.start_ns < b.start_ns;
  });
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&points](size_t a, size_t b) {
    const Point& pa = points[a];
    const Point& pb = points[b];
    return pa.thread != pb.thread ? pa.thread < pb.thread : pa.time_ns < pb.time_ns;
  });
  std::vector<int64_t> result(points.size(), -1);
  std::vector<const Entry*> open;  // started, not yet known to have ended: a stack
  size_t next = 0;
  uint64_t thread = 0;
  bool first = true;
  for (const size_t point_index : order) {
    const Point& point = points[point_index];
    if (first || point.thread != thread) {
      first = false;
      thread = point.thread;
      open.clear();
      // Skip to this thread's entries.
      next = static_cast<size_t>(
          std::lower_bound(entries.begin(), entries.end(), thread,
                           [](const Entry& e, uint64_t t) { return e.thread < t; }) -
          entries.begin());
    }
    while (next < entries.size() && entries[next].thread == thread &&
           entries[next].start_ns <= point.time_ns) {
      open.push_back(&entries[next++]);
    }
    // An entry buried under a later one that is still open stays until it surfaces; it cannot
    // be the answer before then, since the later one is innermost.
    while (!open.empty() && open.back()->end_ns < point.time_ns) open.pop_back();
    if (!open.empty()) result[point_index] = static_cast<int64_t>(open.back()->index);
  }
  return result;
}

}  // namespace flopscope::importer
