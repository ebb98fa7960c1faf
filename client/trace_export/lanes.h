#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace flopscope::client {

// Keeps the slices of one timeline that overlap apart, for both export formats: a track (or
// Chrome thread) draws nested slices only, but kernels of one stream can overlap (programmatic
// dependent launch; seen in real H100 and B200 traces) and process-scoped start/end ranges may
// cross. Each slice goes to the first lane of its timeline whose last slice ended at or before
// it starts, so a lane's slices follow one another in the order they are written (a slice's end
// is written before the next one's start even when they touch); lane 0 is the timeline itself.
// At most kMaxLanes lanes; past them a slice shares the last lane (drawn nested, counted).
class Lanes {
 public:
  static constexpr uint32_t kMaxLanes = 64;
  using Timeline = std::tuple<int32_t, int64_t, uint64_t>;  // rank, kind, id

  uint32_t Assign(const Timeline& timeline, int64_t start_ns, int64_t end_ns) {
    std::vector<int64_t>& ends = last_end_[timeline];
    for (uint32_t lane = 0; lane < ends.size(); ++lane) {
      if (ends[lane] <= start_ns) {
        ends[lane] = end_ns;
        return lane;
      }
    }
    if (ends.size() < kMaxLanes) {
      ends.push_back(end_ns);
      return static_cast<uint32_t>(ends.size() - 1);
    }
    ++crowded_;
    return kMaxLanes - 1;
  }

  // Slices that found no free lane.
  uint64_t crowded() const { return crowded_; }

 private:
  absl::flat_hash_map<Timeline, std::vector<int64_t>> last_end_;
  uint64_t crowded_ = 0;
};

}  // namespace flopscope::client
