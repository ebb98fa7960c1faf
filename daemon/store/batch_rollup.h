#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Memory copies or sets of one path: kept apart from kernels (schema/rank.sql: memory_stats).
struct MemoryTotals {
  uint64_t count = 0;
  int64_t time_ns = 0;
  uint64_t bytes = 0;
};

// The SELF figures of one range path, as kept in module_stats and memory_stats
// (schema/rank.sql). BatchRollup fills the figures of uncounted records; `flops` and
// `counted_kernels` come from counted FLOPs (CountedRollup) and are only read back here.
struct SelfStats {
  uint64_t calls = 0;
  int64_t cpu_time_ns = 0;
  int64_t min_ns = 0;  // meaningful when calls > 0
  int64_t max_ns = 0;
  uint64_t kernels = 0;          // kernels only
  int64_t gpu_time_ns = 0;       // their durations summed
  double flops = 0;              // counted FLOPs, every precision summed
  bool has_flops = false;        // some kernel of the path was counted
  uint64_t counted_kernels = 0;  // kernels with counted FLOPs
  MemoryTotals copies;           // memcpy
  MemoryTotals sets;             // memset
};

// The kernels of one range occurrence (schema/rank.sql: instance_stats).
struct InstanceActivity {
  uint64_t path_id = 0;
  uint64_t kernels = 0;
  int64_t first_start_ns = 0;
  int64_t last_end_ns = 0;
  int64_t busy_ns = 0;  // union of the kernels' intervals
};

// The occurrence a kernel's span counts in: its range instance; for a graph kernel attributed
// to the range that captured it (path set, instance 0), the (graph launch, path) pair with the
// top bit set; 0 for none (launched with no range open, or a memory activity).
uint64_t OccurrenceKey(const v1::KernelRecord& kernel);

// Folds a batch into per-path self figures and per-occurrence kernel spans, so that the
// rollup tables are updated with one UPSERT per path (occurrence) and batch instead of one per
// record. Kernels with path 0 (no range open) are kept under path 0. Counted range events and
// activities (`counted`: replay-slowed, DESIGN: FLOPs) are left out of every figure. Reused from
// batch to batch to keep its tables allocated.
class BatchRollup {
 public:
  void Reset();
  void Add(const v1::RangeEvent& range);
  void Add(const v1::KernelRecord& kernel);
  void AddBatch(const v1::Batch& batch);

  const absl::flat_hash_map<uint64_t, SelfStats>& by_path() const { return by_path_; }
  const absl::flat_hash_map<uint64_t, InstanceActivity>& by_occurrence() const {
    return by_occurrence_;
  }

 private:
  struct Interval {
    uint64_t key;
    uint64_t path_id;
    int64_t start_ns;
    int64_t end_ns;
  };
  static void AddTo(SelfStats& stats, const v1::KernelRecord& kernel);
  void FoldOccurrences();

  absl::flat_hash_map<uint64_t, SelfStats> by_path_;
  absl::flat_hash_map<uint64_t, InstanceActivity> by_occurrence_;
  std::vector<Interval> intervals_;
};

}  // namespace flopscope::daemon
