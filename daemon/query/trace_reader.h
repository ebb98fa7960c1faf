#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/store/step_index.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

// The raw timeline of one rank file, for `flopscope export` (Query.GetTrace): every range event
// and GPU activity, read on a connection of its own inside one read transaction and handed on in
// bounded chunks (v1::TraceChunk), session after session.
//
// Flows: a first pass counts, per range occurrence in the window, the activities it launched;
// then the range events go out with their counts and the activities with their ordinal in their
// range, so the export can name each flow from either end without holding any record. The
// activities are read in file order (no index is kept on the raw tables, ingest speed comes
// first, and sorting a million of them costs memory with their count); the range events, far
// fewer, in start order (SQLite sorts them), which the export needs to close each track's
// slices in order. Memory: one chunk, the session's definitions and counted FLOPs, and 16 bytes
// per range occurrence in the window.

// A range with more activities than this gets flows to the first ones only; the others are
// counted in TraceChunk.flows_left_out (a Perfetto event holding a million flow ids helps
// nobody).
inline constexpr size_t kMaxFlowsPerRange = 4096;
// A chunk is sent once it holds this many records or about this many bytes.
inline constexpr size_t kTraceChunkRecords = 4096;
inline constexpr size_t kTraceChunkBytes = 1 << 20;

// Time a trace covers: records that overlap [first_ns, last_ns].
struct TraceWindow {
  int64_t first_ns = std::numeric_limits<int64_t>::min();
  int64_t last_ns = std::numeric_limits<int64_t>::max();
};

// The time steps `steps.first` .. `steps.last` of this rank span (its `step` ranges of the
// `flopscope` domain, numbered as reports number them: StepIndex); nullopt when the rank has no
// step in the window.
absl::StatusOr<std::optional<TraceWindow>> StepTimeWindow(SqliteDb& db,
                                                          const StepWindowRequest& steps);

// Hands the rank's trace within `window` to `emit`, chunk by chunk, session after session.
// CANCELLED when `emit` returns false (the client went away).
absl::Status ReadRankTrace(SqliteDb& db, int32_t rank, const TraceWindow& window,
                           const std::function<bool(v1::TraceChunk)>& emit);

}  // namespace flopscope::daemon
