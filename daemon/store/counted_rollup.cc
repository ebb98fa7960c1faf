#include "daemon/store/counted_rollup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {

std::string TensorPrecision(absl::string_view source) {
  return absl::StrCat(kTensorPrecisionPrefix, source);
}

double TotalFlops(const v1::FlopCounters& flops) {
  double total = flops.fp64() + flops.fp32() + flops.fp16();
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) total += tensor.flops();
  return total;
}

void CountedRollup::Reset() {
  by_path_.clear();
  module_precisions_.clear();
  phase_precisions_.clear();
  steps_.clear();
}

void CountedRollup::AddBatch(const v1::Batch& batch) {
  Reset();
  for (const v1::KernelFlops& counted : batch.kernel_flops()) Add(counted);
  AddSteps(batch);
}

void CountedRollup::Add(const v1::KernelFlops& counted) {
  const v1::FlopCounters& flops = counted.flops();
  CountedTotals& totals = by_path_[counted.path_id()];
  totals.flops += TotalFlops(flops);
  ++totals.kernels;
  ForEachPrecision(flops, [&](std::string precision, double value) {
    PrecisionTotals& phase = phase_precisions_[{counted.phase_path_id(), precision}];
    phase.flops += value;
    ++phase.kernels;
    PrecisionTotals& module = module_precisions_[{counted.path_id(), std::move(precision)}];
    module.flops += value;
    ++module.kernels;
  });
}

void CountedRollup::AddSteps(const v1::Batch& batch) {
  for (const v1::KernelFlops& counted : batch.kernel_flops()) {
    if (counted.counted_step() >= 0) steps_.push_back(counted.counted_step());
  }
  // Bounded: the validator allows kMaxWindowSteps steps per window.
  for (const v1::CounterWindowRecord& window : batch.windows()) {
    if (!window.status().empty() || window.first_step() < 0) continue;
    for (int64_t step = window.first_step(); step <= window.last_step(); ++step) {
      steps_.push_back(step);
    }
  }
  std::sort(steps_.begin(), steps_.end());
  steps_.erase(std::unique(steps_.begin(), steps_.end()), steps_.end());
}

}  // namespace flopscope::daemon
