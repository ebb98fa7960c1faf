#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "daemon/report/step_statistics.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

// Where a session's path goes in the report: a module (-1: none) and, for a `flopscope`-domain
// path, a phase (-1: none). Indexes are the ReportBuilder's.
struct StepTarget {
  int module = -1;
  int phase = -1;
};

// Merges the per-step figures of ranks (RankStepFigures) into the report: per module and per
// phase, one sample per rank and step that ran it, the occurrences of its paths within the step
// summed (a restarted rank's sessions and a phase's paths of one name add up); then the median,
// min and max over the samples. Counted and unfinished steps never get here (StepStatistics
// leaves them out); the window names them. The step-to-step period's samples are pooled over
// the ranks likewise.
//
// A module's latency per step is its GPU busy time where it had kernels in the window, else its
// CPU time (push to pop), as the report's totals take GPU time over CPU time.
class StepRollup {
 public:
  // Bounds PhaseStats.per_step (one entry per rank and step) so a long job's report stays small.
  static constexpr size_t kMaxPhaseStepTimes = 100000;

  using Resolve = std::function<StepTarget(int64_t sid, uint64_t path_id)>;

  // Leave PhaseStats.per_step out (ReportRequest.omit_step_times); call before AddRank.
  void OmitStepTimes() { keep_step_times_ = false; }
  // How many ranks will be added (a hint: each module's samples get their room at its first
  // rank instead of growing through 64 ranks of 3000 steps); call before AddRank.
  void ExpectRanks(size_t ranks) { expected_ranks_ = ranks; }
  // `rank` labels the phases' per-step times (PhaseStats.per_step).
  void AddRank(int32_t rank, const RankStepFigures& figures, const Resolve& resolve);

  // Phase `index` as the per-step figures have it (calls, CPU time, min, max, median and, where
  // steps are marked, the time of each rank's steps); untouched when no rank's figures had it.
  void FillPhase(int index, v1::PhaseStats* row) const;
  // Module `index`'s StepLatency, for a requested window in which it ran.
  void FillModule(int index, v1::ModuleStats* row) const;
  // Report.steps, when some rank marks steps or a window was requested.
  void FillWindow(v1::Report* report) const;

  bool window_requested() const { return window_requested_; }
  // The most steps a rank marks, and the steps (counted or not) of the window, over the ranks.
  int64_t steps_marked() const { return steps_marked_; }
  uint64_t steps_in_window() const { return uncounted_steps_ + counted_in_window_; }
  // The steps of the window that did not finish on some rank (StepStatistics), ascending.
  const std::set<int64_t>& unfinished_steps() const { return unfinished_steps_; }

 private:
  struct PassSamples {
    std::vector<int64_t> cpu_ns;
    std::vector<int64_t> busy_ns;  // parallel to cpu_ns
  };
  struct ModuleSamples {
    std::vector<int64_t> cpu_ns;
    std::vector<int64_t> busy_ns;  // parallel to cpu_ns
    PassSamples forward;           // steps in which it ran in the pass
    PassSamples backward;
    bool gpu = false;
  };
  // This rank's sums of one module in one step.
  struct StepSums {
    int64_t cpu_ns = 0;
    int64_t busy_ns = 0;
    PassSum forward;
    PassSum backward;
  };
  struct StepTime {
    int32_t rank = 0;
    int64_t step = 0;
    int64_t ns = 0;
  };
  struct PhaseSamples {
    bool seen = false;
    uint64_t calls = 0;
    int64_t cpu_time_ns = 0;
    std::vector<int64_t> samples;
    // Steps that ran the phase (of every rank) by its occurrences in them, where steps are
    // marked.
    std::map<uint32_t, uint64_t> occurrences_per_step;
    std::vector<StepTime> per_step;  // where steps are marked; at most kMaxPhaseStepTimes
    bool per_step_truncated = false;
  };
  void AddPhases(int32_t rank, const RankStepFigures& figures, const Resolve& resolve);
  void AddModules(const RankStepFigures& figures, const Resolve& resolve);

  std::vector<ModuleSamples> modules_;  // by module index
  std::vector<PhaseSamples> phases_;    // by phase index
  bool any_rank_ = false;
  bool keep_step_times_ = true;
  size_t expected_ranks_ = 1;
  bool window_requested_ = false;
  int64_t steps_marked_ = 0;
  int64_t first_step_ = 0;
  int64_t last_step_ = -1;
  bool window_seen_ = false;  // some rank has steps in the window
  uint64_t uncounted_steps_ = 0;
  uint64_t counted_in_window_ = 0;
  std::set<int64_t> counted_steps_;
  std::set<int64_t> unfinished_steps_;
  std::vector<int64_t> step_periods_ns_;  // every rank's
};

}  // namespace flopscope::daemon
