#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/batch_rollup.h"
#include "daemon/rank_snapshot.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

// NVTX domain of steps, phases and metadata marks (DESIGN: Metadata channel).
inline constexpr char kFlopscopeDomain[] = "flopscope";
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
// Phases: flopscope-domain ranges grouped by their own (last) name: calls, total, min, max.
class ReportBuilder {
 public:
  explicit ReportBuilder(std::string job_id) : job_id_(std::move(job_id)) {}

  // Also list the `top` GPU activities (by total time) of module `path` and its descendants
  // ("/" for all, kUnattributedPath for those with no module); snapshots then need their
  // kernel_groups. Call before AddRank.
  void ListTopKernels(std::string path, uint32_t top);

  void AddRank(const v1::RankInfo& info, const RankSnapshot& snapshot);
  v1::Report Build() const;
  // Whether ListTopKernels' path names something in the report (a module, "/" or
  // kUnattributedPath).
  bool KnowsTopKernelsPath() const;

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
  };

  struct Phase {
    std::string name;
    uint64_t calls = 0;
    int64_t total_ns = 0;
    int64_t min_ns = 0;
    int64_t max_ns = 0;
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
  void AddSpan(const Target& target, const PathSpan& span);
  void AddKernelGroup(const Target& target, const RankSnapshot::KernelGroup& group);
  bool InTopKernelsSubtree(int module) const;
  void AppendTopKernels(v1::Report* report) const;
  void AddParams(uint32_t dp_rank, const std::vector<v1::Metadata>& metadata);
  void AppendModules(int index, const std::vector<SelfStats>& inclusive,
                     const absl::flat_hash_map<std::string, uint64_t>& params,
                     v1::Report* report) const;

  std::string job_id_;
  std::vector<v1::RankInfo> ranks_;
  std::vector<Module> modules_;  // a parent always comes before its children
  std::vector<int> roots_;
  absl::flat_hash_map<std::string, int> module_by_path_;
  SelfStats unattributed_;
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
};

}  // namespace flopscope::daemon
