#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "importer/import_plan.h"
#include "importer/path_interner.h"
#include "importer/thread_timeline.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Replays a recording's ranges the way the injector follows NVTX, per thread and in time order:
// module ranges nest on one stack (their paths form the module tree), steps and phases on a
// second one in the `flopscope` domain (so they are never parents of modules). Each closed
// occurrence becomes a PlannedRange with an instance id, and each module occurrence an entry of
// a ThreadTimeline for kernel attribution.
//
// Classification: nn.Module events are modules; annotations become steps (ProfilerStep#N ->
// `step`), phases (forward / backward / optimizer; one nested in an open phase of the same name
// stays a module) or modules (range_role.h); GPU annotations that duplicate a CPU annotation
// (same External id, or same name when there is none) are dropped, the others are modules on
// their stream's timeline. NVTX ranges of the `flopscope` domain keep their names there. NVTX
// start/end ranges take the innermost open range as parent but never become one.
//
// Nesting is by start time: a range that starts inside an open one is its child, even if it
// overruns it (clock rounding in traces). Deeper than 256 levels (the daemon's limit) a range is
// left out and counted as a STACK_OVERFLOW loss.
class RangeNester {
 public:
  static constexpr size_t kMaxDepth = 256;

  explicit RangeNester(const TraceRecording& recording) : recording_(recording) {}

  void Run();

  const PathInterner& paths() const { return paths_; }
  std::vector<PlannedRange>& ranges() { return ranges_; }
  // Module occurrences; timeline entry i is module_targets()[i].
  const ThreadTimeline& modules() const { return modules_; }
  const std::vector<Attribution>& module_targets() const { return module_targets_; }
  // Step occurrences; timeline entry i is step step_numbers()[i].
  const ThreadTimeline& steps() const { return steps_; }
  const std::vector<int64_t>& step_numbers() const { return step_numbers_; }
  // Step and phase occurrences (every pushed `flopscope`-domain range); entry i has path
  // flopscope_paths()[i].
  const ThreadTimeline& flopscope_ranges() const { return flopscope_ranges_; }
  const std::vector<uint64_t>& flopscope_paths() const { return flopscope_paths_; }
  uint64_t overflowed() const { return overflowed_; }
  uint64_t gpu_duplicates() const { return gpu_duplicates_; }

 private:
  struct Open {
    int64_t start_ns;
    int64_t end_ns;
    uint64_t path_id;
    uint64_t instance_id;
    absl::string_view phase;  // flopscope stack: to spot a phase inside itself
  };

  static bool PhaseIsOpen(absl::string_view phase, const std::vector<Open>& stack);
  std::vector<size_t> SortedRanges() const;
  void Place(const RawRange& range, std::vector<Open>* modules, std::vector<Open>* flopscope);
  bool IsGpuDuplicate(const RawRange& range) const;

  const TraceRecording& recording_;
  PathInterner paths_;
  std::vector<PlannedRange> ranges_;
  ThreadTimeline modules_;
  std::vector<Attribution> module_targets_;
  ThreadTimeline steps_;
  std::vector<int64_t> step_numbers_;
  ThreadTimeline flopscope_ranges_;
  std::vector<uint64_t> flopscope_paths_;
  uint64_t next_instance_ = 1;
  uint64_t overflowed_ = 0;
  uint64_t gpu_duplicates_ = 0;
  absl::flat_hash_set<uint64_t> cpu_external_ids_;
  absl::flat_hash_set<uint32_t> cpu_annotation_names_;
};

}  // namespace flopscope::importer
