#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// The SELF figures of one range path, as kept in module_stats (schema/rank.sql).
struct SelfStats {
  uint64_t calls = 0;
  int64_t cpu_time_ns = 0;
  int64_t min_ns = 0;  // meaningful when calls > 0
  int64_t max_ns = 0;
  uint64_t kernels = 0;
  int64_t gpu_time_ns = 0;
  double flops = 0;
  bool has_flops = false;  // some activity of the path carried counters
};

// Counted FLOPs of one activity: every precision summed (DESIGN: FLOPs).
double TotalFlops(const v1::FlopCounters& flops);

// Folds a batch into per-path self figures, so that module_stats is updated with one UPSERT per
// path and batch instead of one per record. Kernels with path 0 (no range open) are kept under
// path 0. Reused from batch to batch to keep its table allocated.
class BatchRollup {
 public:
  void Reset() { by_path_.clear(); }
  void Add(const v1::RangeEvent& range);
  void Add(const v1::KernelRecord& kernel);
  void AddBatch(const v1::Batch& batch);

  const absl::flat_hash_map<uint64_t, SelfStats>& by_path() const { return by_path_; }

 private:
  static void AddTo(SelfStats& stats, const v1::KernelRecord& kernel);

  absl::flat_hash_map<uint64_t, SelfStats> by_path_;
};

}  // namespace flopscope::daemon
