#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/store/batch_writer.h"
#include "daemon/store/instance_id_set.h"
#include "daemon/store/rank_totals.h"
#include "daemon/store/step_folding.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/session_definitions.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// What a stream learns when its session is opened.
struct SessionHandle {
  int64_t sid = 0;             // the session's key inside this rank file
  uint64_t committed_seq = 0;  // highest batch seq already committed (0 for a new session)
};

// Records as a producer counts them (UpMessage.progress, its loss counters): range events,
// activities, metadata, counted FLOPs and counter windows; definitions and losses are not records.
inline uint64_t ProducerRecordCount(const v1::Batch& batch) {
  return uint64_t(batch.ranges_size()) + batch.kernels_size() + batch.metadata_size() +
         batch.kernel_flops_size() + batch.windows_size();
}

// What one stream of a session saw, for EndStream.
struct StreamTally {
  uint64_t announced = 0;  // the highest Progress.records_queued (0: none came)
  uint64_t received = 0;   // records of the batches this stream committed (duplicates not)
  // Records the process made, from its made-counts file (an orphan spool's collector reads it);
  // unknown on a live stream.
  bool made_known = false;
  uint64_t made = 0;
  // The signal the process's drain began for (SIGINT, SIGTERM), from the same file; 0: none.
  int end_signal = 0;
};

struct CommitOutcome {
  uint64_t committed_seq = 0;  // what to acknowledge
  bool duplicate = false;      // seq <= committed_seq: nothing was written
};

// One rank's database, <data_dir>/jobs/<job>/rank-<NNNNN>.sqlite. Every batch is validated
// (BatchValidator) and committed in ONE transaction, with the module_stats rollup, the loss
// counters and the session's last_seq: a failure rolls everything back. Batches at or below the
// session's last_seq are duplicates (a resend after a reconnect) and are acknowledged unwritten;
// a new batch with a range instance id the session stored before is refused (InstanceIdSet).
//
// Thread-safe: one mutex serializes every use of the connection (a rank normally has one stream,
// so it is uncontended; two streams of a restarted rank simply take turns).
class RankStore {
 public:
  // With `fold` enabled, old steps are folded after commits (step_folding.h).
  static absl::StatusOr<std::unique_ptr<RankStore>> Open(const std::string& path,
                                                         const FoldPolicy& fold = {});
  // SQLite's page cache of a writer connection, in KiB (PRAGMA cache_size; SQLite's default is
  // 2000).
  static constexpr int kWriterCacheKib = 512;
  // A bare connection to a rank file with exactly the store's schema and settings (WAL,
  // synchronous=NORMAL, kWriterCacheKib): the baseline bench/ingest compares Commit() against
  // with raw INSERTs.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> OpenDatabase(const std::string& path);
  ~RankStore();

  // Registers a new session, or finds the one with the same session_id (a reconnect) and
  // returns how far it got.
  absl::StatusOr<SessionHandle> OpenSession(const v1::SessionHello& hello) ABSL_LOCKS_EXCLUDED(mu_);

  // Validates and commits `batch` for session `sid`. INVALID_ARGUMENT with the validator's
  // message for a bad batch (nothing stored); other codes for storage failures (nothing stored).
  // `outcome` (optional) says what to acknowledge. `origin`: who sent it (BatchValidator's
  // rule on the loss causes only a node daemon may carry).
  absl::Status Commit(int64_t sid, const v1::Batch& batch, CommitOutcome* outcome = nullptr,
                      BatchOrigin origin = BatchOrigin::kProducer) ABSL_LOCKS_EXCLUDED(mu_);

  // A stream of session `sid` ended. With the session's final batch committed, nothing is
  // missing: its end counts are cleared. Without one, the session is flagged
  // (LOSS_CAUSE_ENDED_WITHOUT_FINAL = 1) and LOSS_CAUSE_NOT_ARRIVED becomes what the producer
  // announced minus what is stored; a stream that announced nothing (an orphan spool's replay)
  // only takes what it delivered off the earlier figure. With the records the process made
  // known (tally.made), LOSS_CAUSE_KILLED becomes made - stored - the losses counted after a
  // record was made (DAEMON_UNREACHABLE, REJECTED, EXIT_UNDELIVERED, NOT_ARRIVED), floored at 0:
  // what was still in its thread buffers. OpenSession clears the flag again. With that file
  // naming the signal whose drain the process began (tally.end_signal) and still no final batch,
  // the session gets one `process.end_signal_cut_short` metadata row (kEndSignalCutShortKey):
  // views name the signal instead of guessing a kill. It is the daemon's, never a record the
  // producer made (StoredRecords leaves it out).
  absl::Status EndStream(int64_t sid, const StreamTally& tally) ABSL_LOCKS_EXCLUDED(mu_);

  RankTotals Totals() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  struct Session {
    int64_t start_time_ns = 0;  // the hello's, bounding range starts (BatchValidator)
    uint64_t last_seq = 0;
    SessionDefinitions definitions;
    InstanceIdSet instance_ids;  // every range instance id stored (range_instance_ids)
  };

  RankStore(std::string path, std::unique_ptr<SqliteDb> db, std::unique_ptr<BatchWriter> writer);
  absl::Status PrepareStatements() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadTotals() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadLosses() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> InsertSession(const v1::SessionHello& hello, int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadDefinitions(int64_t sid, SessionDefinitions* definitions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> StoredRecords(int64_t sid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> NotArrivedAfter(int64_t sid, const StreamTally& tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> KilledAfter(int64_t sid, uint64_t made, uint64_t not_arrived)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetEndCounts(int64_t sid, bool final, uint64_t not_arrived, bool made_known,
                            uint64_t killed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetCutShortSignal(int64_t sid, bool final, const StreamTally& tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadInstanceIds(int64_t sid, InstanceIdSet* ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteInTransaction(int64_t sid, const v1::Batch& batch, const Session& session,
                                  const InstanceIdSet::Change& new_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteInstanceIds(int64_t sid, const InstanceIdSet::Change& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Folds old steps once enough records came since the last try; a failure is only logged.
  void MaybeFold(uint64_t records) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  // Declared first so that it is destroyed last: the statements below belong to it.
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<BatchWriter> writer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> begin_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> commit_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> rollback_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> find_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> insert_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> touch_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> sum_losses_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> clear_ended_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> write_ids_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> delete_ids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);  // by sid
  RankTotals totals_ ABSL_GUARDED_BY(mu_);
  FoldPolicy fold_ ABSL_GUARDED_BY(mu_);
  uint64_t records_since_fold_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace flopscope::daemon
