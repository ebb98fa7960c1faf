#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "common/mutex.h"
#include "injector/ranges/range_tracker.h"

namespace flopscope::injector::cupti {

// graph node id -> the range open when the node was created (DESIGN: a kernel replayed from a
// CUDA graph belongs to the range open when its node was captured). Filled from the resource
// callbacks GRAPHNODE_CREATED (stream capture or explicit construction, on the thread doing it)
// and GRAPHNODE_CLONED (cuGraphClone and instantiation copy nodes; the copy inherits the
// original's range). Entries are kept after their graph is destroyed: an instantiated graph
// outlives the graph it was made from, and its kernels may carry either node id.
//
// Thread-safe. Nodes are created when graphs are built, not per launch, so one mutex suffices.
class GraphNodeTable {
 public:
  static constexpr size_t kDefaultMaxNodes = 1u << 20;

  explicit GraphNodeTable(size_t max_nodes = kDefaultMaxNodes) : max_nodes_(max_nodes) {}
  GraphNodeTable(const GraphNodeTable&) = delete;
  GraphNodeTable& operator=(const GraphNodeTable&) = delete;

  // Nodes created with no module range open are not kept: their kernels fall back to the range
  // of the graph launch. Beyond max_nodes, new nodes are not kept either (same fallback).
  void NodeCreated(uint64_t node_id, RangeContext context);
  void NodeCloned(uint64_t node_id, uint64_t original_node_id);
  bool Find(uint64_t node_id, RangeContext* context) const;

  size_t size() const;
  uint64_t not_kept() const;

 private:
  const size_t max_nodes_;
  // Guards everything below; held for one map operation, never across a CUPTI call.
  mutable Mutex mutex_;
  std::unordered_map<uint64_t, RangeContext> nodes_ FS_GUARDED_BY(mutex_);
  uint64_t not_kept_ FS_GUARDED_BY(mutex_) = 0;
};

}  // namespace flopscope::injector::cupti
