#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

// The counted FLOPs of one module or phase in a report: per counted step, summed over ranks
// (each rank's FLOPs divided by that rank's counted steps before they are added; DESIGN: FLOPs).
// Sums are linear, so a module's figures become inclusive by adding its children's; the steps
// are not (children share their ranks' steps) and are kept by CountedFigures' owner.
struct CountedFigures {
  bool counted = false;  // some kernel was counted (its FLOPs may still be 0)
  // Per counted step, every precision: from module_stats for modules (AddTotal); phases have
  // only their precisions, whose sum SetOn reports.
  double flops = 0;
  std::map<std::string, double> by_precision;  // per counted step
  uint64_t kernels = 0;                        // counted kernels (not per step)
  // Per counted step, of kernels launched inside a forward / backward range (modules only).
  std::optional<double> fwd_flops;
  std::optional<double> bwd_flops;

  void Add(const CountedFigures& other);
  // One rank's figures over its counted steps, scaled by `per_step` (1 / those steps): its self
  // total (module_stats) or one of its precision rows (module_flops, phase_flops).
  void AddTotal(double flops_over_steps, uint64_t kernels_counted, double per_step);
  void AddPrecision(const std::string& precision, double flops_over_steps, double per_step);
  // FLOPs of the module's kernels launched inside a forward (`forward` true) or backward range.
  void AddPass(bool forward, double flops_over_steps, double per_step);

  // Sets flops, flops_by_precision (largest first), counted_kernels and counted_steps; leaves
  // the row alone when nothing was counted (flops stays absent).
  void SetOn(uint32_t steps, v1::ModuleStats* row) const;
  // Sets flops (the sum of the precisions) and flops_by_precision.
  void SetOn(v1::PhaseStats* row) const;
};

// Which rank last added its steps to a module or phase, and the steps added so far: a rank's
// counted steps count once per module, however many of its paths lead there.
class RankStepTally {
 public:
  // Adds `steps` unless rank number `rank_index` already did; true when added.
  bool Add(int rank_index, uint64_t steps);
  uint32_t steps() const { return steps_; }

 private:
  int last_rank_ = -1;
  uint32_t steps_ = 0;
};

}  // namespace flopscope::daemon
