#pragma once

// Folding the old steps of a rank file, so that a week-long job fits its disk (DESIGN: Storage).
//
// A kernel row takes about 55 bytes; at 1,000 kernels per step and a step per second that is
// ~200 MB per rank and hour. Reports read rollups kept at ingest (module_stats, memory_stats,
// instance_stats) and the range events; only `report --kernels` and the trace export read raw
// kernels. So once a rank has more than `keep_raw_steps` steps, a fold (one transaction):
//   - groups the uncounted kernels of the commit-order prefix that ended before the horizon
//     into kernel_folds, as
//     `report --kernels` groups them, and deletes them (counted kernels, those of counter
//     windows, stay raw: they are few and tie to kernel_flops);
//   - packs the commit-order prefix of range_events that ended before the horizon, each with its
//     instance_stats row, into range_folds (range_fold_codec.h) and deletes those rows.
// The horizon is the start of the newest step but `keep_raw_steps` (steps: `step` ranges of the
// `flopscope` domain, over the rank's sessions; at most kMaxStepsPerFold steps a fold, the
// store folding again at once while more remain), so the running step and the recent ones are
// never touched, and kernels that arrive late (CUPTI flushes) still find their raw range. A rank
// without step marks is never folded.
//
// Exactness: RankReader decodes the folds before the raw events, so it sees the same events, in
// the same order, with the same per-occurrence figures; `report --steps` medians, spans and the
// kernel groups come out identical (step_folding_unittest.cc computes both from one input).

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"

namespace flopscope::daemon {

struct FoldPolicy {
  // Steps kept raw; 0 disables folding (flopscoped --keep-raw-steps).
  int64_t keep_raw_steps = 0;
  // RankStore tries a fold after this many records (range events and activities) committed
  // since its last try: a fold scans the raw tables, so it runs every few hundred steps.
  uint64_t check_every_records = 200000;
};

// One fold folds at most this many steps, so that it holds the store (and its stream) for well
// under a second even when a file written without folding is folded for the first time.
inline constexpr int64_t kMaxStepsPerFold = 100;

// Where a fold stops: before the step starting at start_ns (0: nothing to fold); `more`: older
// steps than the policy keeps would remain after it (kMaxStepsPerFold).
struct FoldHorizon {
  int64_t start_ns = 0;
  bool more = false;
};

// What one fold did.
struct FoldOutcome {
  int64_t horizon_ns = 0;  // 0: nothing to fold (too few steps)
  bool more = false;       // folding again would fold more (kMaxStepsPerFold)
  uint64_t kernels_folded = 0;
  uint64_t range_events_folded = 0;
  uint64_t instance_rows_folded = 0;
};

class StepFolder {
 public:
  // Folds what is older than the policy's horizon, in one write transaction (BEGIN IMMEDIATE)
  // that the caller must not have open. Safe to call at any time; a second call with nothing
  // new to fold only reads.
  static absl::StatusOr<FoldOutcome> Fold(SqliteDb& db, const FoldPolicy& policy);

  // The start of the newest step but `keep_raw_steps`, or of the step kMaxStepsPerFold after
  // the oldest raw one when that comes first.
  static absl::StatusOr<FoldHorizon> Horizon(SqliteDb& db, int64_t keep_raw_steps);

 private:
  static absl::Status FoldInTransaction(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome);
  static absl::Status FoldKernels(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome);
  static absl::Status FoldRanges(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome);
};

}  // namespace flopscope::daemon
