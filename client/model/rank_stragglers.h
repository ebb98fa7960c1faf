#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/model/profile_model.h"

namespace flopscope::client {

// The straggler analysis of `flopscope ranks`: which ranks take longer per step than their peers,
// and the module that accounts for it. Pure arithmetic over per-rank profiles (BuildProfile of a
// one-rank report), so the unit tests pin every figure.

// A rank's time per step: its measured `step` range when marked, else DeepSpeed's iter latency
// (fwd + bwd + step), else the forward latency; nullopt when none is known.
std::optional<double> StepTimeOf(const Profile& rank);

struct Straggler {
  double step_s = 0;         // this rank's time per step
  double median_step_s = 0;  // the median over the ranks with a known step time
  double excess_pct = 0;     // (step - median) / median, in percent
  // The module whose latency above its own median (over the ranks that ran it) explains the
  // excess: found from the top-level module with the largest excess, descending while one child
  // carries at least half of its parent's excess. Empty when no module is slower than usual.
  std::string module;
  double module_excess_s = 0;
};

struct StragglerOptions {
  // A rank is a straggler when its step time exceeds the median by more than this.
  double threshold_pct = 5;
};

// One entry per profile, in the same order: set for the stragglers. Needs at least two ranks
// with a known step time (a lone rank has no peers to be slower than).
std::vector<std::optional<Straggler>> FindStragglers(const std::vector<Profile>& ranks,
                                                     const StragglerOptions& options = {});

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

}  // namespace flopscope::client
