#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/peak_flops.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// The DeepSpeed-style profile (summary, aggregated and detailed sections) computed from the
// daemon's Report: pure arithmetic, so every figure is pinned by unit tests.
//
// Per step: a module's latency is its time over the run divided by the steps of one rank (the
// `step` phase's calls over the ranks included; 1 when no step was marked); GPU time when the
// module has GPU records, else CPU time (push to pop). FLOPs per step likewise; MACs = FLOPs / 2
// (DeepSpeed's convention). A module with no counted FLOPs takes the FLOPs its framework
// announced (`flops <path>=<n>` metadata, per step), flagged as announced. `class <path>=<Name>`
// names a module's class for the aggregated profile.
// Per GPU: a report over several ranks is averaged over them (times and FLOPs are sums there).

struct ProfileOptions {
  std::optional<double> peak_tflops;   // overrides the peak table
  std::optional<Precision> precision;  // overrides the announced/assumed dominant precision
};

// --peak-tflops and --precision as typed: INVALID_ARGUMENT for a peak <= 0 or an unknown precision.
absl::StatusOr<ProfileOptions> ParseProfileOptions(const std::optional<double>& peak_tflops,
                                                   const std::string& precision);

// A figure and, when it has no value, why; `note` also labels estimates.
struct Figure {
  std::optional<double> value;
  std::string note;
};

struct ModuleRow {
  std::string path;
  std::string name;
  std::string class_name;  // `class <path>=<Name>` metadata, else the name without ".N"
  uint32_t depth = 0;
  std::optional<double> params;
  std::optional<double> flops;  // per step
  bool flops_announced = false;
  // Per step: announced (`macs <path>=<n>`, DeepSpeed counts MACs apart from FLOPs: a conv's
  // bias adds are FLOPs but no MACs), else flops / 2.
  std::optional<double> macs;
  double latency_s = 0;  // per step
  bool latency_is_gpu = false;
  uint64_t kernels = 0;
};

struct Profile {
  std::string job_id;
  std::string scope;  // "rank 0", "ranks 0-7 (mean per GPU)", "model replica 1 (ranks 4-7)", ...
  int ranks = 0;
  int world_size = 1;
  int dp_size = 1;
  int mp_size = 1;
  uint64_t steps = 0;  // per rank; 0 when no `step` range was marked
  std::optional<int64_t> batch_size;
  Figure params_per_gpu, params_of_model;
  Figure fwd_macs_per_gpu, fwd_flops_per_gpu, fwd_flops_of_model;
  Figure fwd_latency_s, bwd_latency_s, step_latency_s, iter_latency_s;
  Figure fwd_flops_per_s, bwd_flops_per_s, fwd_bwd_flops_per_s;
  Figure samples_per_s, mfu;
  std::string device;              // first device name seen, empty when none
  std::string precision;           // the precision MFU is measured against
  std::string flops_source;        // "counted", "announced", or why there are none
  std::vector<ModuleRow> modules;  // depth-first, as the Report
};

// `model_figures_measured`: params/FLOPs of the model are the report's own (the report covers a
// whole model replica); otherwise they are per GPU x mp_size, labelled as DeepSpeed's estimate.
Profile BuildProfile(const flopscope::v1::Report& report, const ProfileOptions& options,
                     bool model_figures_measured = false);

// Latency, FLOPs and MACs of the summary recomputed from what they derive from (the group
// rollups change the inputs and call this again).
void DeriveRates(const ProfileOptions& options, Profile& profile);

// The class name fallback: "layer.3" -> "layer", "Qwen2DecoderLayer_13" (Kineto) ->
// "Qwen2DecoderLayer", "0" -> "0".
std::string ClassFromName(const std::string& name);

}  // namespace flopscope::client
