#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/model/profile_model.h"
#include "common/peak_flops.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// Counted FLOPs in the DeepSpeed-style profile (DESIGN: FLOPs): the pieces BuildProfile and
// DeriveRates call, apart so that each rule is tested on its own.

// The ranks a report's counted FLOPs come from, which per-GPU figures divide by: those with a
// counter window that did not fail, or every rank of the report when none has a window
// (imported counters come without one). At least 1.
int CountedRanks(const flopscope::v1::Report& report);

// The peak-table precision of a counted one: "fp64", "fp32", "fp16" as such; "tensor:<source>" by
// the source's input type (fp64, tf32, bf16, fp16, fp8). nullopt for types the table has no peak
// for (fp4, fp6) and names it does not know.
std::optional<Precision> PeakPrecisionOf(const std::string& counted_precision);

// A module's counted FLOPs into its row, per GPU (the daemon's sum over ranks divided by
// `counted_ranks`), with their precisions, steps and kernels. Nothing when it was not counted.
// `passes`: the job marks forward/backward ranges; then a module whose counted FLOPs the daemon
// split by pass shows its forward ones in `flops` (the whole in all_passes_flops).
void SetCountedFlops(const flopscope::v1::ModuleStats& module, int counted_ranks, bool passes,
                     ModuleRow& row);

// The whole job's FLOPs by precision (the top-level modules and <unattributed> added up), the
// counter windows and the FP16 convention. Call once the rows hold their counted FLOPs.
void FillCountedSummary(const flopscope::v1::Report& report, Profile& profile);

// The summary's fwd FLOPs (and MACs = FLOPs / 2) measured from a counted `forward` phase, and its
// bwd FLOPs from a counted `backward` phase; each per GPU and labelled "measured". Without a
// counted forward phase fwd_flops_per_gpu keeps the top-level modules' FLOPs; without a counted
// backward phase DeriveRates uses DeepSpeed's 2 x fwd estimate.
void MeasurePhaseFlops(const flopscope::v1::Report& report, Profile& profile);

// bwd_flops_per_gpu from fwd when it was not measured (DeepSpeed's 2 x fwd estimate, labelled).
void EstimateBwdFlops(Profile& profile);

// Every module's achieved FLOPS: its FLOPs per step over its latency per step (the uncounted
// steps), or absent and why.
void DeriveModuleRates(Profile& profile);

// A report's counter windows, as the profile keeps them.
std::vector<CountedWindow> CountedWindowsOf(const flopscope::v1::Report& report);

// Which steps were counted on which ranks, windows with equal steps and settings grouped:
// "steps 3-4 on ranks 0-7 (set full, 3 passes, 0 unmatched); step 9 on rank 2 failed: hardware
// busy (DCGM?)". Empty without windows.
std::string CountedStepsLine(const std::vector<CountedWindow>& windows);

// The counted figures of a model replica from its ranks' profiles (group_profiles.h), once
// `out.modules` holds the merged rows: module precisions, counted steps and kernels summed like
// their FLOPs; the job's precisions and the measured bwd FLOPs per GPU as means over the ranks
// (bwd stays measured only when every rank measured it, else DeriveRates estimates it); the
// windows of every rank.
void CombineCountedFlops(const std::vector<Profile>& ranks, Profile& out);

// Labels of the measured or estimated phase FLOPs.
inline constexpr char kMeasuredForward[] = "measured: counted forward phase";
inline constexpr char kMeasuredBackward[] = "measured: counted backward phase";
inline constexpr char kBwdEstimate[] = "estimated: bwd flops = 2 x fwd flops, as DeepSpeed";

}  // namespace flopscope::client
