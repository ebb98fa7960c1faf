#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/sqlite/sqlite_db.h"

namespace flopscope::daemon {

// Read connections to rank files, kept open between reports. Opening a rank file costs more than
// reading a small one (SQLite parses the schema, the daemon checks its version), and
// `flopscope ranks` reads every rank of a job each time; with the connections kept, a repeated
// listing only runs the queries.
//
// A connection is taken for one report and given back after it; idle ones are kept up to
// `capacity`, the least recently used closed first. No transaction stays open on an idle
// connection (RankReader::Read commits), so the writer's checkpoints are never held back.
//
// Thread-safe: a mutex guards the idle list; connections themselves are used by one report at a
// time (taken out of the list), and opened and closed outside the lock.
class ReaderPool {
 public:
  // Descriptors one idle connection holds once ingest's writer has closed its file: the
  // database, its WAL, the WAL index (-shm) and the writer's own database descriptor, which
  // SQLite's unix VFS keeps open until the last connection to the file lets go of its lock (a
  // WAL-mode connection holds a shared lock while open). Campaign row 5c' found 4 where 3 had
  // been counted; reader_pool_unittest.cc measures it.
  static constexpr size_t kDescriptorsPerIdleConnection = 4;
  // Descriptors left to everything else whatever the limit: streams, the catalog, the outbox.
  static constexpr size_t kReservedDescriptors = 512;

  explicit ReaderPool(size_t capacity) : capacity_(capacity) {}

  // How many idle connections the process can afford: half of its open-file limit above
  // kReservedDescriptors, at kDescriptorsPerIdleConnection each, at most 4096. The other half
  // stays for ingest: each open session's writer holds 3 (database, WAL, -shm) and its stream a
  // socket, so a full pool never makes a new session fail to open its file.
  static size_t CapacityForFileLimit();

  // An idle connection to `path`, else a new one (RankReader::Open).
  absl::StatusOr<std::unique_ptr<SqliteDb>> Take(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `db` for the next report on its file. Give back only connections whose last read
  // succeeded; a failed one is simply dropped.
  void GiveBack(std::unique_ptr<SqliteDb> db) ABSL_LOCKS_EXCLUDED(mu_);
  // Opens an idle connection to `path` ahead of the first report, when none is kept yet. Called
  // when a rank connects: its writer has the file open then, so the WAL index exists and the
  // open is cheap, whereas the first reader of a file nobody holds open must rebuild it (about
  // 1 ms a file here: most of the first `flopscope ranks` over 1024 ranks).
  absl::Status Warm(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

  // Closes the idle connections to files under `directory` (a pruned job's: an open
  // connection would keep its deleted files' space); returns how many. A connection a report
  // holds meanwhile is not kept when given back (GiveBack checks that its file still exists).
  size_t DropUnder(const std::string& directory) ABSL_LOCKS_EXCLUDED(mu_);

  size_t idle() ABSL_LOCKS_EXCLUDED(mu_);
  // No room for another idle connection (a warm-up stops here instead of evicting).
  bool full() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Idle = std::list<std::unique_ptr<SqliteDb>>;  // most recently used first

  const size_t capacity_;
  absl::Mutex mu_;
  Idle idle_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Idle::iterator> by_path_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flopscope::daemon
