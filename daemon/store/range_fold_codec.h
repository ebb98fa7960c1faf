#pragma once

// The packed form of folded range events (schema/rank.sql: range_folds.data, DESIGN: Storage):
// a commit-order run of range_events rows, each with the instance_stats row of its occurrence
// when it had one, in about a fifth of the bytes the two tables take.
//
// Layout: a format byte (kRangeFoldFormat), the event count, then per event a flags varint
// (kind << 2 | counted << 1 | has_stats) and the columns as varints, each integer either a
// ZigZag delta from the previous event's value (sid, instance, thread, start) or from a value of
// the same event (parent from instance, end from start, stats times from start and from each
// other). Deltas wrap in uint64, so every value round-trips bit-for-bit, however odd.
//
// Decoding reads bytes from a rank file: a file edited by hand, or damaged, must not crash a
// report. Decode checks every length and refuses trailing bytes (range_fold_codec_fuzzer.cc).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/store/batch_rollup.h"

namespace flopscope::daemon {

inline constexpr uint8_t kRangeFoldFormat = 1;
// The most events one range_folds row holds: bounds a row's size and a decoder's work.
inline constexpr uint64_t kMaxEventsPerFold = 1 << 16;

// One range_events row and, with has_stats, the instance_stats row keyed by its instance.
struct FoldedRange {
  int64_t sid = 0;
  uint64_t path_id = 0;
  uint64_t instance_id = 0;
  uint64_t parent_instance_id = 0;
  uint64_t thread_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t kind = 0;
  bool counted = false;
  bool has_stats = false;
  InstanceActivity stats;  // path_id, kernels, first_start_ns, last_end_ns, busy_ns
};

// At most kMaxEventsPerFold events (the caller splits longer runs).
std::string EncodeRangeFold(const std::vector<FoldedRange>& events);

// Calls `on_event` for each event in order. INVALID_ARGUMENT (nothing more called) for bytes
// that are not a fold of this format.
absl::Status DecodeRangeFold(absl::string_view data,
                             const std::function<void(const FoldedRange&)>& on_event);

}  // namespace flopscope::daemon
