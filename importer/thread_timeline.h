#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flopscope::importer {

// Ranges on per-thread timelines, answering "which range was innermost on thread T at time t?"
// for many (T, t) at once: the latest-started range with start <= t <= end. For properly nested
// ranges that is the deepest one; ranges that merely overlap resolve to the one started last,
// as an NVTX stack would.
class ThreadTimeline {
 public:
  struct Point {
    uint64_t thread = 0;
    int64_t time_ns = 0;
  };

  // Returns the entry's index, in the order Add was called.
  size_t Add(uint64_t thread, int64_t start_ns, int64_t end_ns);
  size_t size() const { return entries_.size(); }

  // For each point, the index of its innermost entry, or -1 when no entry contains it.
  std::vector<int64_t> Innermost(const std::vector<Point>& points) const;

 private:
  struct Entry {
    uint64_t thread;
    int64_t start_ns;
    int64_t end_ns;
    size_t index;
  };
  std::vector<Entry> entries_;
};

}  // namespace flopscope::importer
