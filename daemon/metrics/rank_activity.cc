#include "daemon/metrics/rank_activity.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/nvtx_vocabulary.h"
#include "common/peak_flops.h"
#include "daemon/store/counted_rollup.h"
#include "daemon/store/step_index.h"

namespace flopscope::daemon::metrics {
namespace {

void AddKernelFlops(const v1::FlopCounters& flops, std::map<std::string, double>* by_precision) {
  if (flops.fp64() > 0) (*by_precision)["fp64"] += flops.fp64();
  if (flops.fp32() > 0) (*by_precision)["fp32"] += flops.fp32();
  if (flops.fp16() > 0) (*by_precision)["fp16"] += flops.fp16();
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) {
    if (tensor.flops() <= 0) continue;
    // Sources are validated UTF-8 of bounded length; only a small set exists per chip.
    (*by_precision)[absl::StrCat(kTensorPrecisionPrefix, tensor.source())] += tensor.flops();
  }
}

}  // namespace

void RankActivity::Observe(std::string_view session_id, const v1::Batch& batch) {
  LearnStepPaths(session_id, batch);
  const auto known = step_paths_.find(std::string(session_id));
  if (known != step_paths_.end()) ObserveSteps(known->second, batch);
  ObserveFlops(batch);
}

void RankActivity::LearnStepPaths(std::string_view session_id, const v1::Batch& batch) {
  for (const v1::RangePath& path : batch.paths()) {
    if (path.domain() != kFlopscopeDomain || path.name() != kStepRange) continue;
    if (step_paths_.size() >= kMaxSessions && !step_paths_.contains(std::string(session_id))) {
      step_paths_.clear();  // sessions of long ago: their step ids will never come again
    }
    absl::flat_hash_set<uint64_t>& ids = step_paths_[std::string(session_id)];
    if (ids.size() < kMaxStepPathsPerSession) ids.insert(path.id());
  }
}

void RankActivity::ObserveSteps(const absl::flat_hash_set<uint64_t>& step_paths,
                                const v1::Batch& batch) {
  for (const v1::RangeEvent& range : batch.ranges()) {
    if (!step_paths.contains(range.path_id())) continue;
    ++steps_;
    // Counted steps ran under kernel replay: their time says nothing about the job's speed.
    if (range.counted() || range.start_ns() < latest_step_start_ns_) continue;
    latest_step_start_ns_ = range.start_ns();
    latest_step_seconds_ = static_cast<double>(range.end_ns() - range.start_ns()) / 1e9;
  }
}

void RankActivity::ObserveFlops(const v1::Batch& batch) {
  for (const v1::KernelFlops& kernel : batch.kernel_flops()) {
    if (kernel.counted_step() < 0) continue;  // launched outside any step: no per-step figure
    if (counted_steps_.size() >= kMaxCountedSteps &&
        !counted_steps_.contains(kernel.counted_step())) {
      if (kernel.counted_step() < counted_steps_.begin()->first) continue;  // older than kept
      counted_steps_.erase(counted_steps_.begin());
    }
    AddKernelFlops(kernel.flops(), &counted_steps_[kernel.counted_step()]);
  }
}

RankFigures RankActivity::Figures() const {
  RankFigures figures;
  figures.steps = steps_;
  figures.step_seconds = latest_step_seconds_;
  if (counted_steps_.empty()) return figures;
  const std::map<std::string, double>& latest = counted_steps_.rbegin()->second;
  double total = 0;
  double dominant = -1;
  for (const auto& [precision, flops] : latest) {
    total += flops;
    if (flops > dominant) {
      dominant = flops;
      figures.step_precision = precision;
    }
  }
  figures.step_flops = total;
  if (!latest_step_seconds_ || *latest_step_seconds_ <= 0) return figures;
  figures.achieved_flops_per_s = total / *latest_step_seconds_;
  const std::optional<Precision> precision = PeakPrecisionOfCounted(figures.step_precision);
  if (!precision || device_name_.empty()) return figures;
  const PeakLookup peak = LookUpPeak(device_name_, *precision);
  if (peak.tflops && *peak.tflops > 0) {
    figures.mfu = *figures.achieved_flops_per_s / (*peak.tflops * 1e12);
  }
  return figures;
}

}  // namespace flopscope::daemon::metrics
