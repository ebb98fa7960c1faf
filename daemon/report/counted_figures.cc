#include "daemon/report/counted_figures.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace flopscope::daemon {
namespace {

// Largest first (the dominant precision leads), names breaking ties.
template <typename Row>
void SetPrecisions(const std::map<std::string, double>& by_precision, Row* row) {
  std::vector<std::pair<std::string, double>> sorted(by_precision.begin(), by_precision.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [precision, flops] : sorted) {
    v1::PrecisionFlops* entry = row->add_flops_by_precision();
    entry->set_precision(precision);
    entry->set_flops(flops);
  }
}

}  // namespace

void CountedFigures::Add(const CountedFigures& other) {
  if (!other.counted) return;
  counted = true;
  flops += other.flops;
  kernels += other.kernels;
  for (const auto& [precision, value] : other.by_precision) by_precision[precision] += value;
  if (other.fwd_flops) fwd_flops = fwd_flops.value_or(0) + *other.fwd_flops;
  if (other.bwd_flops) bwd_flops = bwd_flops.value_or(0) + *other.bwd_flops;
}

void CountedFigures::AddTotal(double flops_over_steps, uint64_t kernels_counted, double per_step) {
  counted = true;
  flops += flops_over_steps * per_step;
  kernels += kernels_counted;
}

void CountedFigures::AddPrecision(const std::string& precision, double flops_over_steps,
                                  double per_step) {
  counted = true;
  by_precision[precision] += flops_over_steps * per_step;
}

void CountedFigures::AddPass(bool forward, double flops_over_steps, double per_step) {
  std::optional<double>& pass = forward ? fwd_flops : bwd_flops;
  pass = pass.value_or(0) + flops_over_steps * per_step;
}

void CountedFigures::SetOn(uint32_t steps, v1::ModuleStats* row) const {
  if (!counted) return;
  row->set_flops(flops);
  if (fwd_flops) row->set_fwd_flops(*fwd_flops);
  if (bwd_flops) row->set_bwd_flops(*bwd_flops);
  SetPrecisions(by_precision, row);
  row->set_counted_kernels(kernels);
  row->set_counted_steps(steps);
}

void CountedFigures::SetOn(v1::PhaseStats* row) const {
  if (!counted) return;
  double total = 0;
  for (const auto& [precision, value] : by_precision) total += value;
  row->set_flops(total);
  SetPrecisions(by_precision, row);
}

bool RankStepTally::Add(int rank_index, uint64_t steps) {
  if (rank_index == last_rank_) return false;
  last_rank_ = rank_index;
  steps_ += static_cast<uint32_t>(steps);
  return true;
}

}  // namespace flopscope::daemon
