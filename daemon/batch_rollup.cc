#include "daemon/batch_rollup.h"

#include <algorithm>

namespace flopscope::daemon {

double TotalFlops(const v1::FlopCounters& flops) {
  double total = flops.fp64() + flops.fp32() + flops.fp16();
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) total += tensor.flops();
  return total;
}

void BatchRollup::Add(const v1::RangeEvent& range) {
  SelfStats& stats = by_path_[range.path_id()];
  const int64_t duration = range.end_ns() - range.start_ns();
  stats.min_ns = stats.calls == 0 ? duration : std::min(stats.min_ns, duration);
  stats.max_ns = stats.calls == 0 ? duration : std::max(stats.max_ns, duration);
  ++stats.calls;
  stats.cpu_time_ns += duration;
}

void BatchRollup::Add(const v1::KernelRecord& kernel) { AddTo(by_path_[kernel.path_id()], kernel); }

void BatchRollup::AddTo(SelfStats& stats, const v1::KernelRecord& kernel) {
  ++stats.kernels;
  stats.gpu_time_ns += kernel.end_ns() - kernel.start_ns();
  if (kernel.has_flops()) {
    stats.flops += TotalFlops(kernel.flops());
    stats.has_flops = true;
  }
}

void BatchRollup::AddBatch(const v1::Batch& batch) {
  Reset();
  for (const v1::RangeEvent& range : batch.ranges()) Add(range);
  // Kernels arrive in runs that share a path: reuse the entry found for the previous one.
  SelfStats* current = nullptr;
  uint64_t current_path = 0;
  for (const v1::KernelRecord& kernel : batch.kernels()) {
    if (current == nullptr || kernel.path_id() != current_path) {
      current_path = kernel.path_id();
      current = &by_path_[current_path];
    }
    // Safe: no insertion happens between the lookup above and this use of the pointer.
    AddTo(*current, kernel);
  }
}

}  // namespace flopscope::daemon
