#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/store/rank_totals.h"
#include "flopscope/v1/query.pb.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// <data_dir>/catalog.sqlite: the jobs and ranks this daemon holds, with who is connected, when
// each was last seen, and their totals (schema/catalog.sql). Listings come from here without
// opening any rank file.
//
// Thread-safe. Three connections to the file: the writer's, serialized by `mu_` between every
// stream of the node (each commit updates it); the queries' own (`read_mu_`); and the
// checkpoints' (`checkpoint_mu_`). Lock hazards avoided: a query never takes `mu_`, so it never
// waits behind the streams' commits, which under 64 streams kept `ranks` waiting up to a second
// (WAL gives each read the last committed state); and no checkpoint runs under `mu_`: SQLite's
// automatic one would run inside a commit every few commits, fsyncing the WAL and the file while
// every other stream (64 hellos at a job's start) queued behind it. Instead a writer that has let
// go of `mu_` checkpoints, PASSIVE, on the third connection once the WAL holds kCheckpointFrames
// frames; one that finds a checkpoint running goes on without it. Crash safety is SQLite WAL's
// as before: a checkpoint copies committed frames into the file, whichever connection runs it.
// Order: `mu_` before `read_mu_`; `checkpoint_mu_` alone (none is taken with another today).
//
// Writes that must not be lost to a full disk (campaign row 6b: a session's end whose COMMIT met
// "database or disk is full" left its rank `connected` until a restart, so neither `prune` nor
// the disk budget would touch the job): a session's end and a rank's totals are kept in memory
// (`pending_`) until a transaction holding them commits. Every later end, totals or connect
// makes them first,
// and so does a listing (ListJobs, ListRanks: what `jobs`, `prune` and the budget's pass read)
// when `mu_` is free at that moment (TryLock: a query still never waits for a commit), and
// RetryPendingWrites. So once space returns, the first of these heals the catalog.
class Catalog {
 public:
  // WAL frames (pages) after which the next writer checkpoints: many tiny commits (one per
  // batch), so the WAL is cut back often and stays small instead of growing to SQLite's default
  // 1000 pages, which on a nearly full disk would eat the room kept for the catalog
  // (daemon/store/disk_space.h).
  static constexpr int kCheckpointFrames = 16;

  // Opens or creates the catalog. No stream survives a daemon restart, so every rank starts
  // disconnected.
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path);

  // A stream of `hello`'s session passed the hello: the rank's identity becomes that session's
  // and it counts one more open stream.
  absl::Status SessionConnected(const v1::SessionHello& hello, int64_t now_ns)
      ABSL_LOCKS_EXCLUDED(mu_);
  // That stream ended (finished, cancelled or rejected). A failure (a full disk) keeps the end,
  // which a later write makes (see the class comment); the status says so.
  absl::Status SessionDisconnected(absl::string_view job_id, int32_t rank, int64_t now_ns)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After a commit: the rank file's totals, replacing the previous ones. Kept on failure as a
  // session's end is.
  absl::Status UpdateTotals(absl::string_view job_id, int32_t rank, const RankTotals& totals,
                            int64_t now_ns) ABSL_LOCKS_EXCLUDED(mu_);

  // The daemon refused a batch of `session_id` for breaking `rule`
  // (daemon/validate/batch_validator.h: RejectedRule); it held `records` records. Counted per
  // session and rule, where the drop happens: the producer's own loss counts cannot include it.
  absl::Status AddRejection(absl::string_view job_id, int32_t rank, absl::string_view session_id,
                            absl::string_view rule, uint64_t records) ABSL_LOCKS_EXCLUDED(mu_);

  // Jobs by first appearance.
  // Records the layout a rank announced with a `parallel` mark (daemon/validate/parallel_mark.h);
  // from then on ListRanks reports it instead of the hello's environment-derived layout.
  absl::Status SetAnnouncedLayout(absl::string_view job_id, int32_t rank,
                                  const v1::ParallelLayout& layout) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<v1::JobInfo>> ListJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // Access model (daemon/access/access_policy.h). Jobs listed before owners were recorded (catalog
  // version 2, or relisted rank files) belong to `legacy_owner`, the daemon's own uid.
  // Makes `uid` the owner of `job_id` unless the job has one; returns the job's owner.
  absl::StatusOr<uint32_t> ClaimJob(absl::string_view job_id, uint32_t uid, uint32_t legacy_owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The owner of `job_id`; nullopt for a job the catalog does not hold.
  absl::StatusOr<std::optional<uint32_t>> JobOwner(absl::string_view job_id, uint32_t legacy_owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every job's owner.
  absl::StatusOr<absl::flat_hash_map<std::string, uint32_t>> JobOwners(uint32_t legacy_owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `digest` as the session's resume-token digest unless it has one; returns the one kept.
  absl::StatusOr<std::string> KeepFirstTokenDigest(absl::string_view job_id, int32_t rank,
                                                   absl::string_view session_id,
                                                   absl::string_view digest)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ranks of a job in rank order; empty for a job the catalog does not hold.
  absl::StatusOr<std::vector<v1::RankInfo>> ListRanks(absl::string_view job_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets `job_id` (flopscope prune, --max-disk: daemon/retention/job_pruner.h): its job, rank,
  // loss, rejection, owner and session-token rows, in one transaction. A job not held is no error.
  absl::Status DeleteJob(absl::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Makes the ends and totals kept after a failed write (see the class comment), waiting for
  // `mu_`; the periodic pass (JobPruner) calls it. OK when none is kept.
  absl::Status RetryPendingWrites() ABSL_LOCKS_EXCLUDED(mu_);
  // Ranks with an end or totals kept, not yet written.
  size_t pending_writes() ABSL_LOCKS_EXCLUDED(mu_);

  // Checkpoints run so far, each outside `mu_` (see the class comment).
  uint64_t checkpoints() const { return checkpoints_.load(std::memory_order_relaxed); }

 private:
  // `mu_` for one write, then the checkpoint that write made due (catalog.cc).
  class WriteLock;

  Catalog(std::unique_ptr<SqliteDb> db, std::unique_ptr<SqliteDb> reader,
          std::unique_ptr<SqliteDb> checkpointer)
      : db_(std::move(db)), reader_(std::move(reader)), checkpointer_(std::move(checkpointer)) {}
  // The writer's WAL hook (sqlite3_wal_hook, run in each commit): notes the WAL's length.
  static int OnWalCommit(void* catalog, sqlite3* db, const char* name, int frames);
  // A PASSIVE checkpoint once the WAL holds kCheckpointFrames frames, unless one is running.
  void CheckpointIfDue() ABSL_LOCKS_EXCLUDED(mu_, checkpoint_mu_);
  absl::Status PrepareStatements() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `body` between BEGIN and COMMIT, rolling back when it fails.
  template <typename Body>
  absl::Status InTransaction(Body body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TouchJob(absl::string_view job_id, int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `pending_` in one transaction; emptied when it commits, kept when it fails.
  absl::Status WritePending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteTotals(absl::string_view job_id, int32_t rank, const RankTotals& totals,
                           int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WritePending from a listing, only when `mu_` is free this instant.
  void RetryPendingIfFree() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PrepareReadStatements() ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  // Runs `body` in one read transaction of the queries' connection (one snapshot for all its
  // statements).
  template <typename Body>
  absl::Status InReadSnapshot(Body body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  // ListRanks inside its read snapshot.
  absl::Status ListRanksIn(absl::string_view job_id, std::vector<v1::RankInfo>* ranks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  absl::Status ReadLosses(absl::string_view job_id, std::vector<v1::RankInfo>* ranks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  absl::Status ReadRejections(absl::string_view job_id, std::vector<v1::RankInfo>* ranks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);

  absl::Mutex mu_;
  // Declared first so that it is destroyed last: the statements below belong to it.
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> begin_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> commit_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> rollback_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> upsert_job_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> upsert_rank_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> disconnect_rank_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> update_totals_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> clear_losses_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> insert_loss_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> set_layout_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> add_rejection_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> claim_job_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> job_owner_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> keep_token_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> token_of_ ABSL_GUARDED_BY(mu_);
  // A rank's writes not made yet (see the class comment): ends count, totals replace.
  struct PendingRank {
    int64_t disconnects = 0;
    int64_t ended_ns = 0;
    std::optional<RankTotals> totals;
    int64_t totals_ns = 0;
  };
  absl::btree_map<std::pair<std::string, int32_t>, PendingRank> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> pending_left_{false};  // !pending_.empty(), read without `mu_`

  // The queries' connection (listings, owners): see the class comment.
  absl::Mutex read_mu_ ABSL_ACQUIRED_AFTER(mu_);
  // Declared before its statements, so that it is destroyed after them.
  std::unique_ptr<SqliteDb> reader_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> read_begin_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> read_end_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> list_jobs_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> list_ranks_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> list_losses_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> list_rejections_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> read_job_owner_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<SqliteStatement> job_owners_ ABSL_GUARDED_BY(read_mu_);

  // The checkpoints' connection: see the class comment.
  absl::Mutex checkpoint_mu_;
  std::unique_ptr<SqliteDb> checkpointer_ ABSL_GUARDED_BY(checkpoint_mu_);
  std::atomic<int> wal_frames_{0};  // the WAL's frames after the last commit (OnWalCommit)
  std::atomic<uint64_t> checkpoints_{0};
  uint64_t checkpoint_failures_ ABSL_GUARDED_BY(checkpoint_mu_) = 0;
};

}  // namespace flopscope::daemon
