#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/report/counted_figures.h"
#include "daemon/report/rank_snapshot.h"
#include "daemon/report/step_rollup.h"
#include "daemon/store/batch_rollup.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

inline constexpr char kUnattributedPath[] = "<unattributed>";

// Builds a Report from rank snapshots (pure: no I/O, so the tree math is unit-tested).
//
// Module tree: range paths outside the `flopscope` domain, merged across sessions and ranks by
// their full path (names from the root joined by '/'; flopscope-domain ranges such as `step` or
// `forward` are left out of the path, so a module is one row whichever phase it ran in). Rows
// come depth-first, children in first-seen order. `calls` and `cpu_time_ns` are the path's own
// (push-to-pop time already covers its children); `kernels`, `gpu_time_ns` (summed activity
// durations, for now) and `flops` include descendants; gpu_time_ns and flops are absent where
// the subtree has no activity / no counted FLOPs; `params` comes from `params <path>=<n>`
// metadata (the last value per rank, summed over the tp x pp ranks of one data-parallel replica:
// the lowest dp rank included — replicas hold the same parameters). Activities launched
// with no module open (path 0, or only flopscope-domain ranges open) form a last row
// "<unattributed>", present only when there are some.
//
// GPU figures: `kernels` and `gpu_time_ns` count kernels; memcpy_* and memset_* the memory
// activities, apart; gpu_span_ns and gpu_busy_ns come from SpanRollup (summed over the module's
// occurrences, each inclusive of its children). Each rank's devices and gpu_status are completed
// from the injector's gpu.* metadata (gpu_metadata.h), which the Announced list leaves out.
//
// Phases: flopscope-domain ranges grouped by their own (last) name: calls, total, min, max, and
// the median, per step over the uncounted steps (StepRollup, from the snapshots' step_figures).
// Per-step figures: with a step window (RankReadOptions::step_window) every module that ran in
// it gets its StepLatency; Report.steps says which steps the latencies come from.
//
// Counted FLOPs (DESIGN: FLOPs): each rank's counted FLOPs are divided by that rank's counted
// steps (RankSnapshot::counted_steps) before ranks are added up, so `flops` and
// `flops_by_precision` are FLOPs per counted step summed over the ranks; `counted_steps` adds the
// counted steps of the ranks with counted kernels in the module's subtree, `counted_kernels` the
// kernels. A phase's FLOPs are those of the kernels launched while it was the innermost
// flopscope-domain range or enclosed it (a `step` holds its `forward`). Counted range events and
// kernels never reach the latency figures (the store keeps them out of its rollups). The report
// lists every counter window of the included ranks and the FP16 convention.
class ReportBuilder {
 public:
  explicit ReportBuilder(std::string job_id) : job_id_(std::move(job_id)) {}

  // Also list the `top` GPU activities (by total time) of module `path` and its descendants
  // ("/" for all, kUnattributedPath for those with no module); snapshots then need their
  // kernel_groups. Call before AddRank.
  void ListTopKernels(std::string path, uint32_t top);
  // Leave the phases' per-step times out (ReportRequest.omit_step_times). Call before AddRank.
  void OmitStepTimes() { step_rollup_.OmitStepTimes(); }
  // How many ranks AddRank will be given (StepRollup::ExpectRanks). Call before AddRank.
  void ExpectRanks(size_t ranks) { step_rollup_.ExpectRanks(ranks); }

  void AddRank(const v1::RankInfo& info, const RankSnapshot& snapshot);
  v1::Report Build() const;
  // Whether ListTopKernels' path names something in the report (a module, "/" or
  // kUnattributedPath).
  bool KnowsTopKernelsPath() const;
  // The per-step figures so far: what the query service checks a step window against.
  const StepRollup& step_rollup() const { return step_rollup_; }

 private:
  struct Module {
    std::string path;
    std::string name;
    std::string domain;
    uint32_t depth = 0;
    int parent = -1;  // index into modules_, -1 for a top-level module
    std::vector<int> children;
    SelfStats self;
    // Already inclusive of descendants (SpanRollup), so never added up the tree again.
    int64_t span_ns = 0;
    int64_t busy_ns = 0;
    bool has_span = false;
    CountedFigures counted;       // self; Build makes it inclusive
    RankStepTally counted_steps;  // already inclusive
  };

  struct Phase {
    std::string name;
    uint64_t calls = 0;
    int64_t total_ns = 0;
    int64_t min_ns = 0;
    int64_t max_ns = 0;
    CountedFigures counted;  // already inclusive of nested phases
  };
  // Where the figures of one session's path go: a module (or -1: unattributed) and, for a
  // flopscope-domain path, a phase.
  struct Target {
    int module = -1;
    int phase = -1;
  };
  class SessionPaths;

  int FindOrAddModule(int parent, const std::string& name, const std::string& domain);
  int FindOrAddPhase(const std::string& name);
  void AddStats(const Target& target, const SelfStats& stats);
  // Path resolvers by session id, in the order sessions first connected.
  using SessionMap = std::map<int64_t, std::unique_ptr<SessionPaths>>;
  // The counted FLOPs of the rank numbered `rank_index` (in AddRank order).
  void AddCounted(SessionMap& sessions, const RankSnapshot& snapshot, int rank_index);
  // The module's (or, for -1, the unattributed row's) counted figures, with the rank's steps
  // tallied up the tree.
  CountedFigures& CountedOf(int module, int rank_index, uint64_t steps);
  void AddSpan(const Target& target, const PathSpan& span);
  void AddKernelGroup(const Target& target, const RankSnapshot::KernelGroup& group);
  bool InTopKernelsSubtree(int module) const;
  void AppendTopKernels(v1::Report* report) const;
  void AddParams(uint32_t dp_rank, const std::vector<v1::Metadata>& metadata);
  void AppendModules(int index, const std::vector<SelfStats>& inclusive,
                     const std::vector<CountedFigures>& counted,
                     const absl::flat_hash_map<std::string, uint64_t>& params,
                     v1::Report* report) const;

  std::string job_id_;
  std::vector<v1::RankInfo> ranks_;
  std::vector<Module> modules_;  // a parent always comes before its children
  std::vector<int> roots_;
  absl::flat_hash_map<std::string, int> module_by_path_;
  SelfStats unattributed_;
  CountedFigures unattributed_counted_;
  RankStepTally unattributed_steps_;
  std::vector<v1::RankCounterWindow> windows_;
  std::vector<Phase> phases_;
  absl::flat_hash_map<std::string, int> phase_by_name_;
  std::map<int, uint64_t> losses_;
  std::string top_kernels_of_;
  uint32_t top_kernels_ = 0;
  // By (kind, name): one entry per kernel name and one per memory kind.
  std::map<std::pair<int, std::string>, v1::KernelSummary> top_kernel_totals_;
  std::vector<v1::Metadata> metadata_;
  // Announced params by data-parallel replica (dp rank), then module path; within a replica the
  // tp x pp shards add up.
  std::map<uint32_t, absl::flat_hash_map<std::string, uint64_t>> params_by_replica_;
  StepRollup step_rollup_;
};

}  // namespace flopscope::daemon
