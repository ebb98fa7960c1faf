#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "injector/cupti/graph_node_table.h"
#include "injector/cupti/launch_ring.h"
#include "injector/kernel_api.h"

namespace flopscope::injector::cupti {

// Attributes GPU activities to the range open at their launch (DESIGN: Attribution):
//  - an activity replayed from a CUDA graph belongs to the range open when its graph node was
//    created (path of that range, instance 0: the capture-time occurrence closed long ago and
//    its span must not stretch over every replay), else to the range open at the graph launch;
//  - any other activity belongs to the range its launch callback recorded under its
//    correlation id;
//  - when that launch was not seen yet, the activity waits (whichever of the two arrives first
//    is fine) for `max_age` aging passes, then is released to the root and counted as
//    launch-not-seen; so is an activity whose ring slot was reused.
// KernelRecord::counted comes from the launch's ring entry (a counter window counted it).
//
// Not thread-safe: the tracer calls it under its join mutex.
class KernelJoiner {
 public:
  struct Options {
    size_t max_pending = 65536;  // beyond this the oldest waiting activity is released
    uint32_t max_age = 2;        // aging passes an activity may wait for its launch
  };
  struct Counters {
    uint64_t by_launch = 0;        // attributed through the launch callback's record
    uint64_t by_graph_node = 0;    // attributed to the range that captured the graph node
    uint64_t launch_not_seen = 0;  // released to the root: launch never seen or slot reused
    uint64_t waited = 0;           // had to wait at least once for their launch
  };

  KernelJoiner(const LaunchRing* ring, const GraphNodeTable* nodes, Options options);
  KernelJoiner(const LaunchRing* ring, const GraphNodeTable* nodes)
      : KernelJoiner(ring, nodes, Options{}) {}

  // Attributes each record (path_id, range_instance_id) and appends the finished ones to *out;
  // the others wait. Waiting ones whose launch has appeared since are finished first. `records`
  // is consumed (when *out starts empty its storage moves there).
  void Join(std::vector<KernelRecord>* records, std::vector<KernelRecord>* out);
  // One aging pass (the tracer runs one per collection cycle). `final`: release everything.
  void Age(bool final, std::vector<KernelRecord>* out);

  size_t pending() const { return pending_.size(); }
  const Counters& counters() const { return counters_; }

 private:
  struct Waiting {
    KernelRecord record;
    uint32_t age = 0;
  };
  enum class Result { kDone, kWait };

  Result Attribute(KernelRecord* record);
  void Release(KernelRecord record, std::vector<KernelRecord>* out);
  // Parks a record whose launch was not seen yet (releasing the oldest when too many wait).
  void Wait(const KernelRecord& record, std::vector<KernelRecord>* out);
  void RetryWaiting(std::vector<KernelRecord>* out);

  const LaunchRing* ring_;
  const GraphNodeTable* nodes_;
  const Options options_;
  std::deque<Waiting> pending_;
  Counters counters_;
};

}  // namespace flopscope::injector::cupti
