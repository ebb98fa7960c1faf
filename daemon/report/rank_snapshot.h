#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/report/span_rollup.h"
#include "daemon/report/step_statistics.h"
#include "daemon/store/batch_rollup.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// What a report needs from one rank file (small tables only: never the raw kernels).
struct RankSnapshot {
  struct Path {
    int64_t sid = 0;
    uint64_t id = 0;
    uint64_t parent_id = 0;
    std::string domain;
    std::string name;
  };
  struct PathStats {
    int64_t sid = 0;
    uint64_t path_id = 0;  // 0: kernels launched with no range open
    SelfStats stats;
  };

  // The GPU activities of one (path, kind, name): for a module's top kernels, read on request.
  struct KernelGroup {
    int64_t sid = 0;
    uint64_t path_id = 0;
    v1::ActivityKind kind = v1::ACTIVITY_KIND_KERNEL;
    std::string name;  // mangled kernel name; empty for memcpy / memset
    uint64_t count = 0;
    int64_t total_ns = 0;
    int64_t min_ns = 0;
    int64_t max_ns = 0;
    uint64_t bytes = 0;
  };

  // Counted FLOPs of one precision: a module_flops row (self, per module path) or a phase_flops
  // row (per innermost flopscope-domain path; path_id 0: no phase was open).
  struct PrecisionRow {
    int64_t sid = 0;
    uint64_t path_id = 0;
    std::string precision;  // "fp64", "fp32", "fp16", "tensor:<source>"
    double flops = 0;
    uint64_t kernels = 0;
  };

  std::vector<Path> paths;       // by session, then id (ids are handed out in first-seen order)
  std::vector<PathStats> stats;  // module_stats rows, with their memory_stats
  std::vector<PathSpan> spans;   // GPU span and busy time per path (already inclusive)
  std::vector<KernelGroup> kernel_groups;  // only when asked for (RankReadOptions)
  std::vector<v1::Metadata> metadata;      // by session, then arrival
  std::map<int, uint64_t> losses;          // cause -> summed over sessions
  std::vector<PrecisionRow> module_flops;
  std::vector<PrecisionRow> phase_flops;
  // Counted FLOPs (every precision) of one module path launched under one phase path, from the
  // kernel_flops rows: what splits a module's FLOPs into its forward and backward pass.
  struct PathPhaseFlops {
    int64_t sid = 0;
    uint64_t path_id = 0;
    uint64_t phase_path_id = 0;  // 0: no flopscope-domain range was open
    double flops = 0;
  };
  std::vector<PathPhaseFlops> path_phase_flops;
  // The steps the counted FLOPs come from, over the sessions that have counted FLOPs: each
  // session's distinct counted steps, 1 for a session without step marks (an import). 0 when
  // nothing was counted. FLOPs per step = counted FLOPs / counted_steps.
  uint64_t counted_steps = 0;
  std::vector<v1::CounterWindowRecord> windows;  // by session, then arrival
  // Per-step figures from the range events (steps, phases; modules for a step window). Absent
  // only in snapshots built by hand, whose phases then come from `stats`.
  std::optional<RankStepFigures> step_figures;
  // Set by the query service, not the reader: what it left alone or out to read this rank (a
  // usual file left alone, the file beside it: left_alone_files.h), naming both; "" else.
  std::string left_alone;
};

}  // namespace flopscope::daemon
