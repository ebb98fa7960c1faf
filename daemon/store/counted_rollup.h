#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Precision names of counted FLOPs, as stored (module_flops, phase_flops) and reported
// (PrecisionFlops): CUDA-core "fp64", "fp32", "fp16", and "tensor:<source>" for tensor cores.
inline constexpr char kTensorPrecisionPrefix[] = "tensor:";
std::string TensorPrecision(absl::string_view source);

// Calls on_precision(name, flops) for every precision of `flops` with FLOPs above 0, CUDA-core
// precisions first, then tensor sources in the order received.
template <typename OnPrecision>
void ForEachPrecision(const v1::FlopCounters& flops, OnPrecision on_precision) {
  if (flops.fp64() > 0) on_precision(std::string("fp64"), flops.fp64());
  if (flops.fp32() > 0) on_precision(std::string("fp32"), flops.fp32());
  if (flops.fp16() > 0) on_precision(std::string("fp16"), flops.fp16());
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) {
    if (tensor.flops() > 0) on_precision(TensorPrecision(tensor.source()), tensor.flops());
  }
}

// Every precision of one kernel's counters summed (DESIGN: FLOPs).
double TotalFlops(const v1::FlopCounters& flops);

// Counted FLOPs of one (path, precision): schema/rank.sql module_flops / phase_flops.
struct PrecisionTotals {
  double flops = 0;
  uint64_t kernels = 0;  // counted kernels with FLOPs of this precision
};

// Counted FLOPs of one path over every precision: module_stats.flops / counted_kernels.
struct CountedTotals {
  double flops = 0;
  uint64_t kernels = 0;
};

// Folds the counted FLOPs (kernel_flops) and windows of one batch into what the rollup tables
// keep, so that each is updated with one UPSERT per key and batch: per module path (total and
// by precision), per phase path by precision, and the steps counted (KernelFlops.counted_step
// >= 0, and every step of a window whose status is empty: a failed window counted nothing).
// Reused from batch to batch to keep its tables allocated.
class CountedRollup {
 public:
  using PathPrecision = std::pair<uint64_t, std::string>;  // (path id, precision)

  void AddBatch(const v1::Batch& batch);

  const absl::flat_hash_map<uint64_t, CountedTotals>& by_path() const { return by_path_; }
  const absl::flat_hash_map<PathPrecision, PrecisionTotals>& module_precisions() const {
    return module_precisions_;
  }
  const absl::flat_hash_map<PathPrecision, PrecisionTotals>& phase_precisions() const {
    return phase_precisions_;
  }
  // Distinct and ascending.
  const std::vector<int64_t>& steps() const { return steps_; }

 private:
  void Reset();
  void Add(const v1::KernelFlops& counted);
  void AddSteps(const v1::Batch& batch);

  absl::flat_hash_map<uint64_t, CountedTotals> by_path_;
  absl::flat_hash_map<PathPrecision, PrecisionTotals> module_precisions_;
  absl::flat_hash_map<PathPrecision, PrecisionTotals> phase_precisions_;
  std::vector<int64_t> steps_;
};

}  // namespace flopscope::daemon
