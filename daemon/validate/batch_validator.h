#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/validate/session_definitions.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Limits on what one session may send (records.proto: everything is untrusted input).
inline constexpr size_t kMaxRecordsPerBatch = 1'000'000;
inline constexpr size_t kMaxNameBytes = 4096;  // range names and domains, counter names
inline constexpr size_t kMaxStringDefBytes = 65536;
inline constexpr size_t kMaxMetadataKeyBytes = 1024;
inline constexpr size_t kMaxMetadataValueBytes = 65536;
inline constexpr uint32_t kMaxNestingDepth = 256;
inline constexpr size_t kMaxPathsPerSession = 1 << 20;
inline constexpr size_t kMaxStringsPerSession = 1 << 20;
inline constexpr int kMaxTensorSourcesPerKernel = 64;
inline constexpr int kMaxRawCountersPerKernel = 1024;
// Step ordinals (KernelFlops.counted_step, window steps) count a process's steps from 0: far below
// this, which keeps step arithmetic clear of overflow.
inline constexpr int64_t kMaxStepOrdinal = int64_t{1} << 40;
// A window's steps are stored one row each (counted_steps): a window spans at most this many.
inline constexpr int64_t kMaxWindowSteps = 10'000;
inline constexpr uint32_t kMaxReplayPasses = 1000;
// Window counts (kernels counted, ranges unmatched) stay exact in SQLite's signed integers.
inline constexpr uint64_t kMaxWindowCount = uint64_t{1} << 48;
// Sequence numbers are stored in SQLite's signed 64-bit integers.
inline constexpr uint64_t kMaxSeq = uint64_t{1} << 62;
// One loss counter's records: summed over many sessions and causes, totals stay exact and
// clear of uint64 wrap-around.
inline constexpr uint64_t kMaxLossRecords = uint64_t{1} << 48;
// A snapshot of open ranges (Batch.open_ranges): threads, and ranges of one thread's stack, at
// most (the injector sends at most 256 threads and 16 ranges a stack).
inline constexpr int kMaxOpenRangeThreads = 1024;
inline constexpr int kMaxOpenRangesPerStack = 64;
// Timestamps are Unix-epoch nanoseconds; anything before 2000-01-01 is a unit or clock mistake.
inline constexpr int64_t kEarliestTimestampNs = 946'684'800LL * 1'000'000'000LL;
// A range event cannot start before its session did (SessionHello.start_time_ns: the injector
// reads it before it records anything, an import sets it to its earliest record), less this
// slack for the realtime clock being stepped back while the process runs (a late first NTP sync)
// and the injector's TSC-to-realtime conversion. So no range is longer than its session's life
// so far, plus this slack and the 1 day the future allows.
inline constexpr int64_t kSessionStartSlackNs = 3600LL * 1'000'000'000LL;

// Records of every kind in `batch` (what a rejection of it drops).
size_t BatchRecordCount(const v1::Batch& batch);

// The rule a status from BatchValidator::Validate names, for counting rejections by rule: the
// record list the problem was found in ("strings", "paths", "ranges", "kernels", "kernel_flops",
// "windows", "metadata", "losses", "open_ranges"), "seq" or "limits" for the batch as a whole, and
// "other" for a status the validator did not write. Carried as a status payload, not parsed from
// the text.
std::string RejectedRule(const absl::Status& status);

// Who sent a batch, for the loss causes only a node daemon may carry.
enum class BatchOrigin {
  kProducer,    // a process's stream or its spool file: anything it says is its own claim
  kNodeDaemon,  // a node daemon's forwarded stream (flopscoped --upstream): may carry
                // LOSS_CAUSE_FORWARD_DROPPED, the records its outbox dropped
};

// Checks one batch against what its session already defined, before anything is stored. Pure:
// no I/O and no clock (the caller passes `now`), so every rule is unit-tested directly.
//
// Rules: 0 < seq <= kMaxSeq; record counts and text sizes within the limits above; ids > 0; a
// path's parent is the root (0) or defined earlier (in an earlier batch or earlier in this one); no
// id is redefined with different content; nesting depth <= 256; names non-empty, UTF-8, without
// NUL; end_ns >= start_ns, both within [2000-01-01, now + 1 day]; range events and kernels
// reference defined paths and strings (kernels may use path 0, the root); enums hold known values.
// Range events: instance_id unique within the batch; parent_instance_id 0 or below instance_id
// (producers number occurrences in push order, and a parent is pushed before its children);
// start_ns not before the session's start less kSessionStartSlackNs (when the hello gave one).
// Whether a parent's own event ever comes is not known here (it pops after its children, maybe
// in a later batch): reports treat an occurrence whose parent never came as a root.
// Counted FLOPs (kernel_flops): path_id and phase_path_id defined or 0, name_id defined or 0,
// counted_step in [-1, kMaxStepOrdinal], counters present with finite FLOPs >= 0, at most
// kMaxTensorSourcesPerKernel tensor sources and kMaxRawCountersPerKernel raw counters (named,
// finite). Windows: steps both
// -1 (no step marks) or 0 <= first <= last with at most kMaxWindowSteps steps, a plausible
// [start_ns, end_ns], texts like names (may be empty), passes <= kMaxReplayPasses, counts below
// kMaxWindowCount. Losses: a known cause, records below kMaxLossRecords, never a cause the daemon
// counts itself (NOT_ARRIVED, ENDED_WITHOUT_FINAL, KILLED), and FORWARD_DROPPED only from a node
// daemon (BatchOrigin::kNodeDaemon). The `counted` flags of
// range events and kernels need no check: either value is valid, and storage keeps flagged records
// out of the rollups.
//
// A failure is INVALID_ARGUMENT naming the batch seq, the record and the problem, e.g.
//   "batch seq 7: kernels[12]: path_id 99 is not defined".
class BatchValidator {
 public:
  // `session_start_ns`: the session's SessionHello.start_time_ns; 0 (none given) bounds range
  // starts by 2000-01-01 only.
  // `origin`: who sent the batch (a producer unless the caller knows the stream is forwarded).
  BatchValidator(const SessionDefinitions& known, absl::Time now, int64_t session_start_ns = 0,
                 BatchOrigin origin = BatchOrigin::kProducer);

  // On success, `added` holds what the batch defines anew (to merge into the session once the
  // batch is committed); definitions that repeat known ones with identical content are not in it.
  absl::Status Validate(const v1::Batch& batch, SessionDefinitions* added);

 private:
  absl::Status CheckCounts(const v1::Batch& batch) const;
  absl::Status CheckStrings(const v1::Batch& batch);
  absl::Status CheckPaths(const v1::Batch& batch);
  absl::Status CheckRanges(const v1::Batch& batch);
  // "" when the range's own fields are sound, else the problem.
  std::string RangeProblem(const v1::RangeEvent& range) const;
  absl::Status CheckInstancesUnique(const v1::Batch& batch) const;
  absl::Status CheckKernels(const v1::Batch& batch);
  absl::Status CheckKernelFlops(const v1::Batch& batch);
  absl::Status CheckFlops(const v1::FlopCounters& flops) const;
  absl::Status CheckWindows(const v1::Batch& batch) const;
  std::string WindowProblem(const v1::CounterWindowRecord& window) const;
  absl::Status CheckMetadata(const v1::Batch& batch) const;
  absl::Status CheckLosses(const v1::Batch& batch) const;
  absl::Status CheckOpenRanges(const v1::Batch& batch) const;
  // "" when one stack of a snapshot taken at `time_ns` is sound, else the problem.
  std::string OpenStackProblem(absl::string_view name,
                               const google::protobuf::RepeatedPtrField<v1::OpenRange>& ranges,
                               uint32_t depth, int64_t time_ns) const;

  const PathDefinition* FindPath(uint64_t id) const;
  bool IsStringDefined(uint32_t id) const;
  // "" when [start_ns, end_ns] is a plausible interval, else the problem.
  std::string IntervalProblem(int64_t start_ns, int64_t end_ns) const;
  std::string TimestampProblem(absl::string_view field, int64_t ns) const;
  absl::Status Reject(absl::string_view record, int index, absl::string_view problem) const;

  const SessionDefinitions& known_;
  const int64_t latest_ns_;
  const int64_t session_start_ns_;  // 0: none given
  const BatchOrigin origin_;
  uint64_t seq_ = 0;
  SessionDefinitions* added_ = nullptr;
};

}  // namespace flopscope::daemon
