#pragma once

#include <cstddef>
#include <functional>

#include "absl/status/statusor.h"
#include "daemon/report/rank_snapshot.h"

namespace flopscope::daemon {

// Runs `read(i)` for i = 0 .. count - 1 on up to `threads` worker threads and hands the results
// to `consume(i, result)` on the calling thread in index order, each as soon as it and those
// before it are ready. A report over many ranks reads their files in parallel (each read is
// independent SQLite work on a connection of its own) while the report itself is built by one
// thread, in rank order.
//
// At most `ahead` results wait beyond the one being consumed, so memory stays that of a few ranks
// however many there are. `consume` returning false stops the reads not yet started; the call
// returns once every started read has finished. With one thread or one item everything runs on the
// caller. `read` must be safe to call from several threads at once.
void ReadInOrder(size_t count, size_t threads, size_t ahead,
                 const std::function<absl::StatusOr<RankSnapshot>(size_t)>& read,
                 const std::function<bool(size_t, absl::StatusOr<RankSnapshot>)>& consume);

// Worker threads for a report's reads: the machine's cores, at least 4 and at most 8.
size_t ReportReadThreads();

}  // namespace flopscope::daemon
