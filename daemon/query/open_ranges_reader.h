#pragma once

// `flopscope where` (issue 31): a rank file's latest snapshot of open ranges (the open_ranges
// table, written by the batch writer from Batch.open_ranges), with each range's path spelled
// out from the file's range tree. Read on a reader connection like every report, inside one read
// transaction.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

struct OpenRangesSnapshot {
  std::string session_id;  // the session whose snapshot is the newest in the file
  int64_t time_ns = 0;
  std::vector<v1::ThreadOpenStack> threads;  // empty: nothing open
};

// The file's newest snapshot over its sessions; nullopt when it has none (a file written before
// snapshots existed lacks the table: none either). A stored snapshot that does not parse, or a
// path id the file does not define, is DATA_LOSS.
absl::StatusOr<std::optional<OpenRangesSnapshot>> ReadLatestOpenRanges(SqliteDb& db);

}  // namespace flopscope::daemon
