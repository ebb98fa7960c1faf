#pragma once

// Records waiting in spool files (issue 30 item 3). A process that ended before delivering its
// batches left them in its spool file, which the daemon's spool collector (daemon/ingest/
// spool_collector.h) delivers soon after. Until then the rank's store counts them NOT_ARRIVED
// (its stream ended without a final batch), so listings and reports called them lost: a 24-rank
// run showed `lost 685842`, then `lost 0` 90 s later. The query side moves what waits out of
// that loss and says it waits.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon {

// Records waiting per job and rank, as the spool collector last counted them.
using SpooledRecords = absl::flat_hash_map<std::string, std::map<int32_t, uint64_t>>;
// Where the query side reads them (SpoolCollector::WaitingRecords); may be null: none wait.
using SpooledRecordsSource = std::function<SpooledRecords()>;

// Sets `rank`'s spooled_records to `spooled` and moves as many records (at most its NOT_ARRIVED
// count) out of its losses; returns how many it moved.
uint64_t MoveSpooledOutOfLosses(uint64_t spooled, v1::RankInfo* rank);

// The same for each of a job's `ranks`, with `spooled` records waiting per rank.
struct SpooledTotals {
  uint64_t waiting = 0;  // summed over the ranks
  uint64_t moved = 0;    // out of their losses
};
SpooledTotals MoveSpooledOutOfLosses(const std::map<int32_t, uint64_t>& spooled,
                                     std::vector<v1::RankInfo>* ranks);

// The same for a report, from the spooled records of its ranks (Report.ranks, moved already).
void MoveSpooledOutOfLosses(v1::Report* report);

}  // namespace flopscope::daemon
