#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/report/session_path_table.h"
#include "daemon/store/step_index.h"

namespace flopscope::daemon {

// One closed range occurrence as the per-step figures need it.
struct RangeOccurrence {
  int64_t start_ns = 0;  // where it is placed among the steps
  int64_t cpu_ns = 0;    // push to pop; 0 for kernels with no range event (graph replays)
  int64_t busy_ns = 0;   // GPU busy time of its kernels and its children's (SpanRollup)
  bool gpu = false;      // it had kernels
  bool counted = false;  // closed inside a counter window: replay-slowed
};

// Which training pass an occurrence ran in: it started inside a `forward` or a `backward` range
// of the `flopscope` domain (the torch hooks open them; DeepSpeed's fwd latency is the former).
enum class Pass { kNone, kForward, kBackward };

// Figures of one pass in one bucket.
struct PassSum {
  bool ran = false;  // some occurrence of the path started inside the pass
  int64_t cpu_ns = 0;
  int64_t busy_ns = 0;
};

// A path's figures in one bucket: a step (by number), or one occurrence when no step is marked.
struct BucketSum {
  int64_t bucket = 0;
  int64_t cpu_ns = 0;        // summed over the path's occurrences in the bucket
  int64_t busy_ns = 0;       // likewise
  uint32_t occurrences = 0;  // the path's occurrences in the bucket
  PassSum forward;           // the part of the above inside `forward` ranges
  PassSum backward;          // and inside `backward` ranges
};

// The per-step figures of one path of one session.
struct PathStepFigures {
  int64_t sid = 0;
  uint64_t path_id = 0;
  uint64_t occurrences = 0;        // uncounted, in the window (the whole run without one)
  int64_t cpu_time_ns = 0;         // their CPU time summed
  bool gpu = false;                // some of them had kernels
  std::vector<BucketSum> buckets;  // by bucket
};

// What one rank's ranges say per step (DESIGN: Time).
struct RankStepFigures {
  int64_t steps_marked = 0;  // every step of the rank
  bool window_requested = false;
  int64_t first_step = 0;  // the window clipped to the rank's steps; none when first > last
  int64_t last_step = -1;
  uint32_t uncounted_steps = 0;        // in the window, unfinished ones not included
  std::vector<int64_t> counted_steps;  // in the window, ascending
  // In the window, ascending: steps that did not finish (UnfinishedSteps), left out like counted
  // ones.
  std::vector<int64_t> unfinished_steps;
  // Start of step N to start of step N+1 of the same session, for each finished, uncounted step
  // N of the window that has one (the time between steps included).
  std::vector<int64_t> step_periods_ns;
  std::vector<int64_t> window_step_ends_ns;  // end of each step of the window, in step order
  std::vector<PathStepFigures> phases;       // `flopscope`-domain paths (steps included)
  std::vector<PathStepFigures> modules;      // only for a requested window
};

// Places one rank's range occurrences in its steps and sums them per path and step, leaving out
// every counted step: a step is counted when its own range, or any range placed in it, closed
// inside a counter window (kernel replay serialised it). Unfinished steps are left out the same
// way: the last step of a session that lacks a phase path (`forward`, `backward`, `optimizer`,
// ...) which every other uncounted step of that session ran, as a step that crashed mid-forward
// and was closed at exit (the torch hooks close what is open then) leaves it. A step range never
// closed is no step at all (the injector counts it as UNCLOSED_RANGE). Pure, so the step math is
// unit-tested; RankReader feeds it while streaming range_events.
//
// Phases always; modules only for a requested window (each of their occurrences is kept until
// Finish, since a step's range closes after the ranges inside it). Without any step marked, each
// uncounted phase occurrence is a bucket of its own, and modules have no per-step figures.
class StepStatistics {
 public:
  explicit StepStatistics(std::optional<StepWindowRequest> window) : window_(window) {}

  bool wants_modules() const { return window_.has_value(); }
  // Room for `occurrences` range occurrences (a cached file knows how many it will add).
  void Reserve(size_t occurrences);
  // A range of the `flopscope` domain; `is_step` for the step range itself.
  void AddPhase(int64_t sid, uint64_t path_id, const RangeOccurrence& occurrence, bool is_step);
  // A module range (or a graph replay's kernels, with no range).
  void AddModule(int64_t sid, uint64_t path_id, const RangeOccurrence& occurrence);
  // A `forward` or `backward` range: module occurrences that start inside it belong to the pass.
  void AddPass(Pass pass, const RangeOccurrence& occurrence);
  // The pass holding `time_ns` (after Finish has sorted the spans; kNone outside every pass).
  Pass PassAt(int64_t time_ns) const;
  // The same, fast for moments asked for in time order (LastStartingAtOrBefore).
  Pass PassAt(int64_t time_ns, size_t* hint) const;

  RankStepFigures Finish();

 private:
  using Key = std::pair<int64_t, uint64_t>;  // (session, path)
  // Occurrences name their path by a dense slot (paths_), so that summing them indexes a vector
  // instead of hashing a key per occurrence (a report streams millions of them).
  struct Pending {
    uint32_t slot = 0;
    RangeOccurrence occurrence;
  };
  uint32_t SlotOf(int64_t sid, uint64_t path_id);
  // Which steps are counted, by step number.
  std::vector<bool> CountedSteps(const StepIndex& index) const;
  // Which steps did not finish, by step number (see the class comment); counted ones never.
  std::vector<bool> UnfinishedSteps(const StepIndex& index, const std::vector<bool>& counted) const;
  // The session of each step, by step number (that of its first range when ranges merged).
  std::vector<int64_t> SessionOfSteps(const StepIndex& index) const;
  std::vector<PathStepFigures> SumPerPath(const std::vector<Pending>& occurrences,
                                          const StepIndex& index, const std::vector<bool>& left_out,
                                          const RankStepFigures& figures) const;

  std::optional<StepWindowRequest> window_;
  std::vector<Key> paths_;  // by slot
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  SessionPathTable<uint32_t> slots_{kNoSlot};  // the inverse
  std::vector<StepSpan> steps_;
  // The session and start of every step range, and the (session, path) of the step ranges.
  std::vector<std::pair<int64_t, int64_t>> step_starts_;  // (start_ns, sid)
  std::vector<Key> step_paths_;
  std::vector<Pending> phases_;   // uncounted only
  std::vector<Pending> modules_;  // uncounted only, and only for a window
  // Where counted ranges (steps included) started: each marks the step holding it as counted.
  std::vector<int64_t> counted_moments_;
  // Spans of the `forward` / `backward` ranges, by start; they do not overlap one another.
  struct PassSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    Pass pass = Pass::kNone;
  };
  std::vector<PassSpan> passes_;
};

// Median (MedianOf, latency_sketch.h: the mean of the middle two for an even count, rounded
// down), min and max.
struct SampleSummary {
  uint32_t samples = 0;
  int64_t median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
};
SampleSummary Summarize(std::vector<int64_t> samples);

}  // namespace flopscope::daemon
