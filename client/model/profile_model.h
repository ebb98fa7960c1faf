#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/model/memory_ledger.h"
#include "common/peak_flops.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// The DeepSpeed-style profile (summary, aggregated and detailed sections) computed from the
// daemon's Report: pure arithmetic, so every figure is pinned by unit tests.
//
// Per step: a module's latency is its time over the run divided by the steps of one rank (the
// uncounted steps over the ranks included; 1 when no step was marked); GPU time when the
// module has GPU records, else CPU time (push to pop). With a step window (`--steps A:B`) it is
// instead the median per step over the window's uncounted steps (GPU busy time, else CPU time),
// min and max alongside. The summary's fwd / bwd / step / iter latencies are the phases' medians
// per step over the uncounted steps. FLOPs per step likewise; MACs = FLOPs / 2
// (DeepSpeed's convention). A module with no counted FLOPs takes the FLOPs its framework
// announced (`flops <path>=<n>` metadata, per step), flagged as announced. `class <path>=<Name>`
// names a module's class for the aggregated profile.
// Per GPU: a report over several ranks is averaged over them (times and FLOPs are sums there).
//
// Counted FLOPs (DESIGN: FLOPs; profile_flops.h): the daemon sends FLOPs per counted step summed
// over ranks; per GPU they are divided by the ranks that counted. A module's achieved FLOPS is
// its FLOPs per step over its latency per step (uncounted steps). The summary's fwd / bwd FLOPs
// are measured from the counted `forward` / `backward` phases when there are such, else fwd is
// the top-level modules' FLOPs and bwd DeepSpeed's 2 x fwd estimate, each labelled. MFU is taken
// against the peak of the dominant counted precision unless --precision says otherwise.

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

// Counted FLOPs of one precision per step and GPU: "fp64", "fp32", "fp16" (CUDA cores) or
// "tensor:<source>" (tensor cores, by source type).
struct PrecisionFlops {
  std::string precision;
  double flops = 0;
};

// One counter window of one rank (the daemon's Report.counter_windows).
struct CountedWindow {
  int32_t rank = 0;
  int64_t first_step = -1;  // both -1: the process marked no steps
  int64_t last_step = -1;
  std::string metric_set;
  uint32_t passes = 0;
  uint64_t kernels_counted = 0;
  uint64_t ranges_unmatched = 0;
  std::string status;  // "" when fine, else why counting failed
};

// The daemon's row for GPU work launched with no module open (query.proto, ReportRequest).
inline constexpr char kUnattributed[] = "<unattributed>";

inline constexpr double kAnnouncedFlopsTolerance = 0.10;

// Why there is no batch size, and the three ways to give one (the torch hooks find none when the
// model is called with keyword arguments only: `model(**batch)`).
inline constexpr char kBatchSizeUnknown[] =
    "batch size not announced: set FLOPSCOPE_BATCH_SIZE=<n>, call "
    "flopscope_torch.announce_batch_size(n) or mark batch_size=<n>";

struct ModuleRow {
  std::string path;
  std::string name;
  std::string class_name;  // `class <path>=<Name>` metadata, else the name without ".N"
  uint32_t depth = 0;
  std::optional<double> params;
  // Per step. Where the job marks `forward` / `backward` ranges and the counters split the
  // module's FLOPs by pass, its forward FLOPs (DeepSpeed's module tree); else every pass's.
  std::optional<double> flops;
  // With that split: the module's counted FLOPs per step in every pass, and in backward alone.
  std::optional<double> all_passes_flops;
  std::optional<double> bwd_flops;
  bool flops_announced = false;
  bool flops_estimated = false;  // the torch hooks' `estimated_flops` (also flops_announced)
  // The framework's analytic FLOPs (`flops <path>=<n>`) when FLOPs were also measured; the
  // measured ones stay in `flops`. `flops_disagree`: they differ by more than
  // kAnnouncedFlopsTolerance of the announced figure (DESIGN: FLOPs), worth a look: a kernel
  // the formula forgot, or a formula that counts work the GPU never did.
  std::optional<double> announced_flops;
  bool flops_disagree = false;
  // The torch hooks' estimate (`estimated_flops <path>`) where `flops` is measured or
  // announced; shown beside it with their ratio in the additions.
  std::optional<double> estimated_flops;
  bool never_ran = false;  // announced by a `module` mark (a container, an unused module), no range
  // A module that never ran with modules under it in the tree (nn.ModuleList, nn.ModuleDict, a
  // Sequential only iterated over): `container` in the documents.
  bool container = false;
  // It never ran, some module under it did, and its latencies (and MACs and FLOPs where it has
  // none of its own) are the sum of its children's, as DeepSpeed adds them up: a figure, not
  // "never ran".
  bool figures_from_children = false;
  // A module with no range (nor children that ran) under a module compiled by torch.compile
  // (`compiled <model path>` marks): it ran inside that module's graph, whose model path this
  // is; "" otherwise.
  std::string inside_compiled;
  // The module's path in the model (`module <path>` marks), which the text's tree prints it at;
  // differs from `path` (its range path) where it ran under another range (`range_module`); ""
  // for a row with no `module` mark.
  std::string model_path;
  // Per step: announced (`macs <path>=<n>`, DeepSpeed counts MACs apart from FLOPs: a conv's
  // bias adds are FLOPs but no MACs), else flops / 2.
  std::optional<double> macs;
  double latency_s = 0;             // per step; forward only where the report knows the passes
  double all_passes_latency_s = 0;  // per step, every range of the module (roots outside the model)
  bool latency_is_gpu = false;
  // Where the job marks `forward` / `backward` phases: latency_s counts only the module's
  // forward ranges (DeepSpeed's fwd latency) and this its backward ranges (an addition).
  std::optional<double> bwd_latency_s;
  bool params_from_children = false;  // not announced: the sum of its children's
  std::string extra_repr;             // `extra_repr <path>=<text>` (torch's module.extra_repr())
  // Why DeepSpeed's profiler prints other FLOPs for this module (`deepspeed_differs`), "" where
  // the two agree; the additions list the modules of each reason.
  std::string deepspeed_differs;
  // FSDP2's shards (`params_shard` marks): (rank, parameter elements it holds), by rank; `params`
  // stays the full size. Empty where no rank holds less than `params`.
  std::vector<std::pair<int32_t, double>> params_held;
  // With a step window: the fastest and the slowest step (absent: it did not run in the window).
  std::optional<double> latency_min_s;
  std::optional<double> latency_max_s;
  uint64_t kernels = 0;
  // Counted FLOPs per step and GPU by precision, largest first; empty when not counted.
  std::vector<PrecisionFlops> flops_by_precision;
  uint32_t counted_steps = 0;  // summed over ranks
  uint64_t counted_kernels = 0;
  Figure flops_per_s;  // achieved: flops / latency per step; absent with the reason
};

// The steps the latencies come from (the daemon's Report.steps).
struct StepScope {
  bool window = false;  // --steps A:B
  int64_t first_step = 0;
  int64_t last_step = -1;
  uint64_t uncounted_steps = 0;        // summed over the ranks included
  std::vector<int64_t> counted_steps;  // counter windows: left out of every latency
  // Steps that did not finish (the session ended inside them): left out of every figure.
  std::vector<int64_t> unfinished_steps;
  // Median start of step N to start of step N+1 (the time between steps included), when known.
  std::optional<double> step_period_s;
};

struct Profile {
  std::string job_id;
  std::string scope;  // "rank 0", "ranks 0-7 (mean per GPU)", "model replica 1 (ranks 4-7)", ...
  int ranks = 0;
  int world_size = 1;
  int dp_size = 1;
  int mp_size = 1;
  uint64_t steps = 0;  // uncounted, per rank; 0 when no `step` range was marked
  StepScope step_scope;
  std::string latency_basis;  // how the latencies were taken: medians or means, over which steps
  std::optional<int64_t> batch_size;
  Figure params_per_gpu, params_of_model;
  Figure fwd_macs_per_gpu, fwd_flops_per_gpu, fwd_flops_of_model;
  Figure bwd_flops_per_gpu;  // measured (backward phase) or DeepSpeed's 2 x fwd estimate
  Figure fwd_latency_s, bwd_latency_s, step_latency_s, iter_latency_s;
  // iter latency is fwd + bwd + step (DeepSpeed); the `step` range's own median is an addition.
  Figure measured_step_range_s;
  bool passes_marked = false;  // `forward` phases exist: module latencies are forward only
  // Gradient accumulation: the `forward` phases of a usual step (the daemon's
  // PhaseStats.occurrences_per_step), 1 without. Where it is k > 1 the DeepSpeed section is one
  // micro-batch's, as DeepSpeed's profiler prints one forward: the model's rows (FLOPs, MACs,
  // latencies), fwd MACs and flops, fwd and bwd latency are the step's / k; iter latency stays
  // the optimizer step's (k forwards, k backwards, the optimizer), as DeepSpeed's timers hold it
  // at an accumulation boundary, and FLOPS per GPU and samples/second divide one micro-batch's
  // flops and samples by it, as DeepSpeed does there (see MicroBatchesPerStep).
  uint32_t micro_batches = 1;
  std::string warmup_note;  // how the steps were chosen when --steps was not given
  // The model root is modules[0]'s subtree; roots after it (loss, data loader, optimizer) are
  // listed apart and never part of its 100 %. model_end: index one past the model's subtree.
  size_t model_end = 0;
  Figure fwd_bwd_step_flops_per_s;  // 3 * fwd flops / iter latency (DeepSpeed's FLOPS per GPU)
  Figure fwd_flops_per_s, bwd_flops_per_s, fwd_bwd_flops_per_s;
  Figure samples_per_s, mfu;
  // batch size x world size over the step-to-step period (StepScope.step_period_s): what the
  // job achieved, data loading between steps included, beside DeepSpeed's samples_per_s.
  Figure samples_per_s_step_to_step;
  // Where the fwd flops come from: "measured", "announced", "estimated" or several joined by
  // " + "; "" when there are none. Every FLOPs figure of the summary carries it.
  std::string fwd_flops_source;
  // The dtype the torch hooks' estimate ran in (`estimated_precision=<p>`), "" when not said.
  std::string estimated_precision;
  // The one-GPU peak MFU divides by, when known.
  std::optional<double> peak_flops_per_s;
  std::string device;  // first device name seen, empty when none
  // What each rank's injector said about its GPU ("no CUDA driver: NVTX ranges only", CUPTI
  // held by another tool, counters restricted to admins...), by rank; "" when all was well.
  std::vector<std::pair<int32_t, std::string>> gpu_status;
  std::string no_gpu_why;  // why there are no GPU figures, in words ("" when there are)
  // How sessions ended when a signal ended them after the injector drained them
  // (`process.end_signal` metadata): signal name ("SIGINT", "SIGTERM") -> sessions. And those
  // whose drain was cut short before their final batch (the daemon's
  // `process.end_signal_cut_short` rows), the same way.
  std::map<std::string, uint64_t> end_signals;
  std::map<std::string, uint64_t> cut_short_signals;
  // Ranks with more than one session, and how many: a restart, or a second run that reused the
  // job id; the figures merge them, so the report warns.
  std::vector<std::pair<int32_t, uint32_t>> merged_sessions;
  // Ranks the daemon had to leave out (a damaged or unreadable file), each with its problem.
  std::vector<std::pair<int32_t, std::string>> unreadable_ranks;
  // Ranks read from the file beside their usual one, which the daemon left alone (a directory,
  // a symlink, a newer daemon's file), each with the daemon's words naming both files.
  std::vector<std::pair<int32_t, std::string>> left_alone_files;
  std::string precision;           // the precision MFU is measured against
  std::string flops_source;        // "counted", "announced", or why there are none
  std::vector<ModuleRow> modules;  // depth-first, as the Report
  // Counted FLOPs: the ranks they come from (per GPU divides by it), the whole job's FLOPs per
  // step and GPU by precision (largest first; the dominant one leads), the counter windows and
  // the FP16 convention of every fp16 figure.
  int counted_ranks = 0;
  std::vector<PrecisionFlops> flops_by_precision;
  std::vector<CountedWindow> counter_windows;
  std::string fp16_convention;
  // Each rank's memory ledger (`memory_ledger` / `memory_peak` marks of the torch hooks), by
  // rank; empty where none was announced.
  std::vector<RankMemory> memory;
};

// `model_figures_measured`: params/FLOPs of the model are the report's own (the report covers a
// whole model replica); otherwise they are per GPU x mp_size, labelled as DeepSpeed's estimate.
Profile BuildProfile(const flopscope::v1::Report& report, const ProfileOptions& options,
                     bool model_figures_measured = false);

// Latency, FLOPs and MACs of the summary recomputed from what they derive from (the group
// rollups change the inputs and call this again).
void DeriveRates(const ProfileOptions& options, Profile& profile);

// "2 of 8 ranks reported (the figures cover those ranks only)" when the report covers fewer
// ranks than the job's world size, followed by each unreadable rank and its problem, and by each
// file the daemon left alone (left_alone_files); "" for the whole job read from its usual files.
std::string PartialRanksLine(const Profile& profile);

// "rank 0 has 2 sessions: ..." when some rank has more than one (see merged_sessions); "" else.
std::string MergedSessionsLine(const Profile& profile);

// What a row with no range of its own is, in words ("" for a module that ran): a container
// whose latency is its children's sum, a container none of whose modules ran, or an unused
// module. The additions and the documents say it instead of "never ran" beside a latency.
std::string NoRangeNote(const ModuleRow& row);

// The path a row has in the model's tree: model_path, else path.
inline const std::string& TreePath(const ModuleRow& row) {
  return row.model_path.empty() ? row.path : row.model_path;
}

// Where a module's `flops` come from: "measured" (counted), "announced", "estimated" (the
// torch hooks' estimate), or "" when it has none.
std::string FlopsSourceOf(const ModuleRow& row);

// One line on how to get measured FLOPs when none were counted (FLOPSCOPE_COUNTERS at the job's
// start, or `flopscope profile JOB --count N` while it runs); "" when some were.
std::string MeasuredFlopsHint(const Profile& profile);

// "gradient accumulation: 3 micro-batches per optimizer step ..." where micro_batches > 1; "" else.
std::string GradientAccumulationLine(const Profile& profile);

// "steps 4 did not finish ..." when some step of the window did not finish; "" otherwise.
std::string UnfinishedStepsLine(const Profile& profile);

// The class name fallback: "layer.3" -> "layer", "Qwen2DecoderLayer_13" (Kineto) ->
// "Qwen2DecoderLayer", "0" -> "0".
std::string ClassFromName(const std::string& name);

}  // namespace flopscope::client
