#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/model/profile_model.h"

namespace flopscope::client {

// The straggler analysis of `flopscope ranks`: which rank holds the others back, and where its
// extra time goes. Pure arithmetic over per-rank profiles (BuildProfile of a one-rank report),
// so the unit tests pin every figure.
//
// Two kinds of straggler:
// - The rank the others waited for (StragglerCause::kWaitedFor). Under data parallelism a
//   collective (DDP's gradient all-reduce) makes every rank's step as long as the slowest one's:
//   the others spend the difference waiting inside it, so step times tell nothing, or point at
//   a rank that waited. Ranks are compared instead on what each does before the collectives,
//   where nobody waits: each module's forward and backward latency (DDP waits for its
//   all-reduce after the backward's module ranges closed) and the time between steps (the
//   step-to-step period less the step: a rank that dawdles between steps has the longer gap,
//   the others wait inside their next step). A rank's excess in one of those is its time there
//   above the median of the other ranks' (per step); the largest says where its extra time
//   went, and is how long the others waited for it there. It is flagged when that excess is
//   above threshold_pct of the ranks' median cycle (step-to-step period, else step time) and the
//   others kept its pace (its own cycle is not longer than theirs by half that excess or more:
//   a rank slower on its own, with no collective, has the longer cycle and is the other kind).
// - The rank whose step is slower (StragglerCause::kSlowerStep): its step time is above the
//   median of all ranks by more than threshold_pct, and it does not keep the others' pace (its
//   step-to-step period is longer than theirs by at least half its step's excess, or unknown).
//   A rank whose step is longer while its period is the others' spent the extra time waiting
//   for another rank; it is never flagged.

// A rank's time per step: its measured `step` range when marked, else DeepSpeed's iter latency
// (fwd + bwd + step), else the forward latency; nullopt when none is known.
std::optional<double> StepTimeOf(const Profile& rank);

// The step-to-step period less the step range (the time between steps: data loading, the
// loop's own work), per step; nullopt unless both are known.
std::optional<double> TimeBetweenStepsOf(const Profile& rank);

enum class StragglerCause {
  kSlowerStep,  // its step is slower and the others did not keep its pace (no collective)
  kWaitedFor,   // the others waited for it
};

// Where a straggler's extra time went.
enum class StragglerPass {
  kNone,          // not known (a slower step with no slower module)
  kForward,       // `module`'s forward
  kBackward,      // `module`'s backward
  kBetweenSteps,  // between its steps (no module)
};

// "forward", "backward", "between steps", "".
const char* StragglerPassName(StragglerPass pass);

struct Straggler {
  double step_s = 0;         // this rank's time per step (0: not known)
  double median_step_s = 0;  // the median over the ranks with a known step time
  double excess_pct = 0;     // (step - median) / median, in percent
  // The module whose latency above the other ranks' median explains the excess: found from the
  // top-level module with the largest excess (in the pass of `pass`), descending while one
  // child carries at least half of its parent's excess. Empty when no module is slower than
  // usual, and between steps.
  std::string module;
  double module_excess_s = 0;  // per step
  StragglerCause cause = StragglerCause::kSlowerStep;
  StragglerPass pass = StragglerPass::kNone;
  // kWaitedFor: how long the others waited for it per step, its excess over the others' median
  // there (the top-level module's in `pass`, or its time between steps); 0 for kSlowerStep.
  double waited_s = 0;
};

struct StragglerOptions {
  // A rank is a straggler when its step time exceeds the median by more than this, or when the
  // others wait for it more than this share of the median cycle.
  double threshold_pct = 5;
};

// One entry per profile, in the same order: set for the stragglers. Needs at least two ranks
// with figures (a lone rank has no peers to be slower than).
std::vector<std::optional<Straggler>> FindStragglers(const std::vector<Profile>& ranks,
                                                     const StragglerOptions& options = {});

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

}  // namespace flopscope::client
