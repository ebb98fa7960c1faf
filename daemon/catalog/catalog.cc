#include "daemon/catalog/catalog.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/logger.h"
#include "daemon/base/resume_token.h"
#include "schema/schema_sql.h"

namespace flopscope::daemon {
namespace {

std::string DeviceNames(const v1::SessionHello& hello) {
  std::vector<absl::string_view> names;
  for (const v1::Device& device : hello.devices()) names.push_back(device.name());
  return absl::StrJoin(names, ", ");
}

// Fills the identity fields a RankInfo takes from the latest session's hello.
void FillFromHello(absl::string_view serialized, v1::RankInfo* info) {
  v1::SessionHello hello;
  // The blob was written by this daemon from a validated hello; an unreadable one only leaves
  // these fields empty.
  if (!hello.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) return;
  info->set_local_rank(hello.local_rank());
  info->set_world_size(hello.world_size());
  *info->mutable_layout() = hello.layout();
  *info->mutable_devices() = hello.devices();
  info->set_gpu_status(hello.gpu_status());
  info->set_command(hello.command());
}

// Steps `rows` (bound to one job, in rank order, the rank in column 0) and hands each row to
// `fill` with the listed rank it belongs to; rows of ranks not listed are skipped. `ranks` is in
// rank order too, so both are walked together.
template <typename Fill>
absl::Status ForEachRankRow(SqliteStatement& rows, std::vector<v1::RankInfo>* ranks, Fill fill) {
  size_t next = 0;
  while (true) {
    absl::StatusOr<bool> row = rows.Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    const int64_t rank = rows.ColumnInt(0);
    while (next < ranks->size() && (*ranks)[next].rank() < rank) ++next;
    if (next == ranks->size() || (*ranks)[next].rank() != rank) continue;
    fill(rows, &(*ranks)[next]);
  }
}

}  // namespace

// Holds `mu_` for one write like absl::MutexLock, then, with `mu_` let go, runs the checkpoint
// that write made due: the fsyncs never hold up the other streams' writes.
class ABSL_SCOPED_LOCKABLE Catalog::WriteLock {
 public:
  explicit WriteLock(Catalog* catalog) ABSL_EXCLUSIVE_LOCK_FUNCTION(catalog->mu_)
      : catalog_(catalog) {
    catalog_->mu_.Lock();
  }
  ~WriteLock() ABSL_UNLOCK_FUNCTION() {
    catalog_->mu_.Unlock();
    catalog_->CheckpointIfDue();
  }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;

 private:
  Catalog* const catalog_;
};

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::OpenWithSchema(path, schema::kcatalogSql);
  if (!db.ok()) return db.status();
  // The WAL is cut back to 64 KiB when it restarts after a checkpoint, so that it stays small
  // (kCheckpointFrames).
  if (absl::Status s = (*db)->Exec("PRAGMA journal_size_limit=65536;"); !s.ok()) return s;
  if (absl::Status s = (*db)->Exec("UPDATE ranks SET connected = 0"); !s.ok()) return s;
  // The queries' and the checkpoints' connections, opened once the schema exists.
  absl::StatusOr<std::unique_ptr<SqliteDb>> reader = SqliteDb::OpenExisting(path);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::unique_ptr<SqliteDb>> checkpointer = SqliteDb::OpenExisting(path);
  if (!checkpointer.ok()) return checkpointer.status();
  std::unique_ptr<Catalog> catalog(
      new Catalog(*std::move(db), *std::move(reader), *std::move(checkpointer)));
  {
    absl::MutexLock lock(&catalog->mu_);  // uncontended: nobody else has the catalog yet
    // Replaces SQLite's automatic checkpoint, which would run inside the commit, under `mu_`.
    sqlite3_wal_hook(catalog->db_->handle(), &Catalog::OnWalCommit, catalog.get());
    if (absl::Status s = catalog->PrepareStatements(); !s.ok()) return s;
  }
  {
    absl::MutexLock lock(&catalog->read_mu_);  // uncontended, as above
    if (absl::Status s = catalog->PrepareReadStatements(); !s.ok()) return s;
  }
  return catalog;
}

int Catalog::OnWalCommit(void* catalog, sqlite3* /*db*/, const char* /*name*/, int frames) {
  static_cast<Catalog*>(catalog)->wal_frames_.store(frames, std::memory_order_relaxed);
  return SQLITE_OK;
}

void Catalog::CheckpointIfDue() {
  int frames = wal_frames_.load(std::memory_order_relaxed);
  if (frames < kCheckpointFrames) return;
  // One checkpoint at a time; a writer that finds one running goes on: that one, or the next
  // writer's, copies its frames too.
  if (!checkpoint_mu_.TryLock()) return;
  int wal = 0;
  int copied = 0;
  const int rc = sqlite3_wal_checkpoint_v2(checkpointer_->handle(), nullptr,
                                           SQLITE_CHECKPOINT_PASSIVE, &wal, &copied);
  checkpoints_.fetch_add(1, std::memory_order_relaxed);
  // All copied: not due again until the WAL, restarted by the next commit, fills up. Else (a
  // commit came meanwhile, or a reader's snapshot held some frames back) the next writer tries.
  if (rc == SQLITE_OK && copied == wal) wal_frames_.compare_exchange_strong(frames, 0);
  // SQLITE_BUSY: another connection was checkpointing (the last one to close, say).
  const bool failed = rc != SQLITE_OK && rc != SQLITE_BUSY;
  const uint64_t failures = failed ? ++checkpoint_failures_ : 0;
  checkpoint_mu_.Unlock();
  // The first failure and every 1000th: a full disk would otherwise log one per batch.
  if (failed && failures % 1000 == 1) {
    LogWarning("catalog: checkpoint failed (", failures, " so far): ", sqlite3_errstr(rc),
               "; the WAL grows until one succeeds");
  }
}

absl::Status Catalog::PrepareStatements() {
  return db_->PrepareAll({
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&upsert_job_,
       "INSERT INTO jobs(job_id, first_seen_ns, last_seen_ns) VALUES(?1, ?2, ?2) "
       "ON CONFLICT(job_id) DO UPDATE SET last_seen_ns = MAX(last_seen_ns, excluded.last_seen_ns)"},
      {&upsert_rank_,
       "INSERT INTO ranks(job_id, rank, host, pid, session_id, devices, hello, connected, "
       "first_seen_ns, last_seen_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?8) "
       "ON CONFLICT(job_id, rank) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
       "session_id = excluded.session_id, devices = excluded.devices, hello = excluded.hello, "
       "connected = connected + 1, last_seen_ns = excluded.last_seen_ns"},
      {&disconnect_rank_,
       "UPDATE ranks SET connected = MAX(connected - ?4, 0), last_seen_ns = MAX(last_seen_ns, ?3) "
       "WHERE job_id = ?1 AND rank = ?2"},
      {&update_totals_,
       "UPDATE ranks SET sessions = ?3, range_events = ?4, kernels = ?5, lost_records = ?6, "
       "last_seen_ns = ?7 WHERE job_id = ?1 AND rank = ?2"},
      {&clear_losses_, "DELETE FROM rank_losses WHERE job_id = ? AND rank = ?"},
      {&insert_loss_, "INSERT INTO rank_losses(job_id, rank, cause, records) VALUES(?, ?, ?, ?)"},
      {&set_layout_, "UPDATE ranks SET announced_layout = ?3 WHERE job_id = ?1 AND rank = ?2"},
      {&add_rejection_,
       "INSERT INTO rank_rejections(job_id, rank, session_id, rule, batches, records) "
       "VALUES(?1, ?2, ?3, ?4, 1, ?5) ON CONFLICT(job_id, rank, session_id, rule) DO UPDATE SET "
       "batches = batches + 1, records = records + excluded.records"},
      // ?3: the legacy owner, for a job listed before owners were recorded.
      {&claim_job_,
       "INSERT OR IGNORE INTO job_owners(job_id, uid) VALUES(?1, CASE WHEN EXISTS("
       "SELECT 1 FROM jobs WHERE job_id = ?1) THEN ?3 ELSE ?2 END)"},
      {&job_owner_,
       "SELECT COALESCE((SELECT uid FROM job_owners WHERE job_id = ?1), "
       "(SELECT ?2 FROM jobs WHERE job_id = ?1))"},
      {&keep_token_,
       "INSERT OR IGNORE INTO session_tokens(job_id, rank, session_id, digest) "
       "VALUES(?1, ?2, ?3, ?4)"},
      {&token_of_,
       "SELECT digest FROM session_tokens WHERE job_id = ?1 AND rank = ?2 AND session_id = ?3"},
  });
}

absl::Status Catalog::PrepareReadStatements() {
  return reader_->PrepareAll({
      {&read_begin_, "BEGIN"},
      {&read_end_, "COMMIT"},
      {&list_jobs_,
       "SELECT j.job_id, COUNT(r.rank), COALESCE(SUM(r.connected), 0), j.first_seen_ns, "
       "j.last_seen_ns, COALESCE(SUM(r.range_events), 0), COALESCE(SUM(r.kernels), 0), "
       "COALESCE(SUM(r.lost_records), 0), "
       "(SELECT COALESCE(SUM(batches), 0) FROM rank_rejections x WHERE x.job_id = j.job_id), "
       "(SELECT COALESCE(SUM(records), 0) FROM rank_rejections x WHERE x.job_id = j.job_id), "
       "(SELECT COALESCE(SUM(records), 0) FROM rank_losses x WHERE x.job_id = j.job_id "
       "AND x.cause = 12) "  // LOSS_CAUSE_ENDED_WITHOUT_FINAL: sessions
       "FROM jobs j LEFT JOIN ranks r ON r.job_id = j.job_id "
       "GROUP BY j.job_id ORDER BY j.first_seen_ns, j.job_id"},
      {&list_ranks_,
       "SELECT rank, host, pid, session_id, hello, connected, first_seen_ns, last_seen_ns, "
       "sessions, range_events, kernels, announced_layout FROM ranks WHERE job_id = ? "
       "ORDER BY rank"},
      {&list_losses_,
       "SELECT rank, cause, records FROM rank_losses WHERE job_id = ? ORDER BY rank, cause"},
      {&list_rejections_,
       "SELECT rank, rule, SUM(batches), SUM(records) FROM rank_rejections WHERE job_id = ? "
       "GROUP BY rank, rule ORDER BY rank, rule"},
      {&read_job_owner_,
       "SELECT COALESCE((SELECT uid FROM job_owners WHERE job_id = ?1), "
       "(SELECT ?2 FROM jobs WHERE job_id = ?1))"},
      {&job_owners_,
       "SELECT j.job_id, COALESCE(o.uid, ?1) FROM jobs j LEFT JOIN job_owners o "
       "ON o.job_id = j.job_id"},
  });
}

template <typename Body>
absl::Status Catalog::InReadSnapshot(Body body) {
  if (absl::Status s = read_begin_->Run(); !s.ok()) return s;
  absl::Status status = body();
  // Ends the read transaction even after a failed read: one left open would keep every later
  // checkpoint from getting past its snapshot, and the WAL would grow.
  const absl::Status ended = read_end_->Run();
  return status.ok() ? ended : status;
}

absl::Status Catalog::SetAnnouncedLayout(absl::string_view job_id, int32_t rank,
                                         const v1::ParallelLayout& layout) {
  const std::string serialized = layout.SerializeAsString();
  WriteLock lock(this);
  set_layout_->BindText(1, job_id);
  set_layout_->BindInt(2, rank);
  set_layout_->BindBlob(3, serialized);
  return set_layout_->Run();
}

template <typename Body>
absl::Status Catalog::InTransaction(Body body) {
  if (absl::Status s = begin_->Run(); !s.ok()) return s;
  absl::Status status = body();
  if (status.ok()) status = commit_->Run();
  if (!status.ok() && sqlite3_get_autocommit(db_->handle()) == 0) rollback_->Run().IgnoreError();
  return status;
}

absl::Status Catalog::TouchJob(absl::string_view job_id, int64_t now_ns) {
  upsert_job_->BindText(1, job_id);
  upsert_job_->BindInt(2, now_ns);
  return upsert_job_->Run();
}

absl::Status Catalog::SessionConnected(const v1::SessionHello& hello, int64_t now_ns) {
  WriteLock lock(this);          // serializes the connection between all streams
  WritePending().IgnoreError();  // ends and totals kept after a failed write first; else kept
  const std::string devices = DeviceNames(hello);
  const std::string serialized = SerializeHelloForStorage(hello);  // never the resume token
  return InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::Status s = TouchJob(hello.job_id(), now_ns); !s.ok()) return s;
    SqliteStatement& stmt = *upsert_rank_;
    stmt.BindText(1, hello.job_id());
    stmt.BindInt(2, hello.rank());
    stmt.BindText(3, hello.host());
    stmt.BindInt(4, hello.pid());
    stmt.BindText(5, hello.session_id());
    stmt.BindText(6, devices);
    stmt.BindBlob(7, serialized);
    stmt.BindInt(8, now_ns);
    return stmt.Run();
  });
}

absl::Status Catalog::SessionDisconnected(absl::string_view job_id, int32_t rank, int64_t now_ns) {
  WriteLock lock(this);  // serializes the connection between all streams
  PendingRank& pending = pending_[{std::string(job_id), rank}];
  ++pending.disconnects;
  pending.ended_ns = std::max(pending.ended_ns, now_ns);
  return WritePending();
}

absl::Status Catalog::UpdateTotals(absl::string_view job_id, int32_t rank, const RankTotals& totals,
                                   int64_t now_ns) {
  WriteLock lock(this);  // serializes the connection between all streams
  PendingRank& pending = pending_[{std::string(job_id), rank}];
  pending.totals = totals;
  pending.totals_ns = now_ns;
  return WritePending();
}

absl::Status Catalog::WritePending() {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status status = InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [key, pending] : pending_) {
      const auto& [job_id, rank] = key;
      if (pending.totals.has_value()) {
        if (absl::Status s = WriteTotals(job_id, rank, *pending.totals, pending.totals_ns);
            !s.ok()) {
          return s;
        }
      }
      if (pending.disconnects == 0) continue;
      if (absl::Status s = TouchJob(job_id, pending.ended_ns); !s.ok()) return s;
      disconnect_rank_->BindText(1, job_id);
      disconnect_rank_->BindInt(2, rank);
      disconnect_rank_->BindInt(3, pending.ended_ns);
      disconnect_rank_->BindInt(4, pending.disconnects);
      if (absl::Status s = disconnect_rank_->Run(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (status.ok()) pending_.clear();
  pending_left_.store(!pending_.empty(), std::memory_order_relaxed);
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (", pending_.size(),
                                   " rank(s)' ends or totals kept: written once the catalog "
                                   "can be written again)"));
}

absl::Status Catalog::WriteTotals(absl::string_view job_id, int32_t rank, const RankTotals& totals,
                                  int64_t now_ns) {
  uint64_t lost = 0;
  for (const auto& [cause, records] : totals.losses) {
    // That one counts sessions, not records.
    if (cause != v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL) lost += records;
  }
  if (absl::Status s = TouchJob(job_id, now_ns); !s.ok()) return s;
  SqliteStatement& stmt = *update_totals_;
  stmt.BindText(1, job_id);
  stmt.BindInt(2, rank);
  stmt.BindUint(3, totals.sessions);
  stmt.BindUint(4, totals.range_events);
  stmt.BindUint(5, totals.kernels);
  stmt.BindUint(6, lost);
  stmt.BindInt(7, now_ns);
  if (absl::Status s = stmt.Run(); !s.ok()) return s;
  clear_losses_->BindText(1, job_id);
  clear_losses_->BindInt(2, rank);
  if (absl::Status s = clear_losses_->Run(); !s.ok()) return s;
  for (const auto& [cause, records] : totals.losses) {
    insert_loss_->BindText(1, job_id);
    insert_loss_->BindInt(2, rank);
    insert_loss_->BindInt(3, cause);
    insert_loss_->BindUint(4, records);
    if (absl::Status s = insert_loss_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Catalog::RetryPendingWrites() {
  if (!pending_left_.load(std::memory_order_relaxed)) return absl::OkStatus();
  WriteLock lock(this);  // serializes the connection between all streams
  return WritePending();
}

void Catalog::RetryPendingIfFree() {
  if (!pending_left_.load(std::memory_order_relaxed)) return;
  if (!mu_.TryLock()) return;    // a writer holds it, and makes the pending writes itself
  WritePending().IgnoreError();  // still full: kept for the next try
  mu_.Unlock();
  CheckpointIfDue();
}

size_t Catalog::pending_writes() {
  absl::MutexLock lock(&mu_);  // guards pending_
  return pending_.size();
}

absl::StatusOr<std::vector<v1::JobInfo>> Catalog::ListJobs() {
  RetryPendingIfFree();             // before `read_mu_` (order: `mu_` first)
  absl::MutexLock lock(&read_mu_);  // the queries' connection: never waits for a commit
  std::vector<v1::JobInfo> jobs;
  while (true) {
    absl::StatusOr<bool> row = list_jobs_->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::JobInfo& job = jobs.emplace_back();
    job.set_job_id(list_jobs_->ColumnString(0));
    job.set_ranks(static_cast<uint32_t>(list_jobs_->ColumnInt(1)));
    job.set_connected_sessions(static_cast<uint32_t>(list_jobs_->ColumnInt(2)));
    job.set_first_seen_ns(list_jobs_->ColumnInt(3));
    job.set_last_seen_ns(list_jobs_->ColumnInt(4));
    job.set_range_events(list_jobs_->ColumnUint(5));
    job.set_kernels(list_jobs_->ColumnUint(6));
    job.set_lost_records(list_jobs_->ColumnUint(7));
    job.set_rejected_batches(list_jobs_->ColumnUint(8));
    job.set_rejected_records(list_jobs_->ColumnUint(9));
    job.set_sessions_without_final(list_jobs_->ColumnUint(10));
  }
  return jobs;
}

absl::StatusOr<std::vector<v1::RankInfo>> Catalog::ListRanks(absl::string_view job_id) {
  RetryPendingIfFree();             // before `read_mu_` (order: `mu_` first)
  absl::MutexLock lock(&read_mu_);  // the queries' connection: never waits for a commit
  std::vector<v1::RankInfo> ranks;
  // Ranks, losses and rejections from one snapshot: a commit between them cannot show a rank's
  // new losses beside its old totals.
  absl::Status status = InReadSnapshot(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_) { return ListRanksIn(job_id, &ranks); });
  if (!status.ok()) return status;
  return ranks;
}

absl::Status Catalog::ListRanksIn(absl::string_view job_id, std::vector<v1::RankInfo>* out) {
  std::vector<v1::RankInfo>& ranks = *out;
  list_ranks_->BindText(1, job_id);
  while (true) {
    absl::StatusOr<bool> row = list_ranks_->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::RankInfo& info = ranks.emplace_back();
    info.set_job_id(std::string(job_id));
    info.set_rank(static_cast<int32_t>(list_ranks_->ColumnInt(0)));
    info.set_host(list_ranks_->ColumnString(1));
    info.set_pid(list_ranks_->ColumnInt(2));
    info.set_session_id(list_ranks_->ColumnString(3));
    FillFromHello(list_ranks_->ColumnText(4), &info);
    info.set_connected(list_ranks_->ColumnInt(5) > 0);
    info.set_first_seen_ns(list_ranks_->ColumnInt(6));
    info.set_last_seen_ns(list_ranks_->ColumnInt(7));
    info.set_sessions(static_cast<uint32_t>(list_ranks_->ColumnInt(8)));
    info.set_range_events(list_ranks_->ColumnUint(9));
    info.set_kernels(list_ranks_->ColumnUint(10));
    if (!list_ranks_->ColumnIsNull(11)) {
      const absl::string_view announced = list_ranks_->ColumnText(11);
      v1::ParallelLayout layout;
      // Written by this daemon from a parsed mark; an unreadable one keeps the hello's layout.
      if (layout.ParseFromArray(announced.data(), static_cast<int>(announced.size()))) {
        *info.mutable_layout() = std::move(layout);
      }
    }
  }
  if (absl::Status s = ReadLosses(job_id, &ranks); !s.ok()) return s;
  return ReadRejections(job_id, &ranks);
}

absl::Status Catalog::ReadLosses(absl::string_view job_id, std::vector<v1::RankInfo>* ranks) {
  list_losses_->BindText(1, job_id);
  return ForEachRankRow(*list_losses_, ranks, [](const SqliteStatement& row, v1::RankInfo* rank) {
    v1::LossCounter* loss = rank->add_losses();
    loss->set_cause(static_cast<v1::LossCause>(row.ColumnInt(1)));
    loss->set_records(row.ColumnUint(2));
  });
}

absl::Status Catalog::AddRejection(absl::string_view job_id, int32_t rank,
                                   absl::string_view session_id, absl::string_view rule,
                                   uint64_t records) {
  WriteLock lock(this);  // serializes the connection between all streams
  add_rejection_->BindText(1, job_id);
  add_rejection_->BindInt(2, rank);
  add_rejection_->BindText(3, session_id);
  add_rejection_->BindText(4, rule);
  add_rejection_->BindUint(5, records);
  return add_rejection_->Run();
}

absl::Status Catalog::ReadRejections(absl::string_view job_id, std::vector<v1::RankInfo>* ranks) {
  list_rejections_->BindText(1, job_id);
  return ForEachRankRow(*list_rejections_, ranks,
                        [](const SqliteStatement& row, v1::RankInfo* rank) {
                          v1::Rejection* rejection = rank->add_rejections();
                          rejection->set_rule(row.ColumnString(1));
                          rejection->set_batches(row.ColumnUint(2));
                          rejection->set_records(row.ColumnUint(3));
                        });
}

// Access model: job owners and session resume-token digests (daemon/access/access_policy.h).

absl::StatusOr<uint32_t> Catalog::ClaimJob(absl::string_view job_id, uint32_t uid,
                                           uint32_t legacy_owner) {
  WriteLock lock(this);  // the claim and the read of the owner are one step
  claim_job_->BindText(1, job_id);
  claim_job_->BindInt(2, uid);
  claim_job_->BindInt(3, legacy_owner);
  if (absl::Status s = claim_job_->Run(); !s.ok()) return s;
  job_owner_->BindText(1, job_id);
  job_owner_->BindInt(2, legacy_owner);
  absl::StatusOr<bool> row = job_owner_->Step();
  if (!row.ok()) return row.status();
  const uint32_t owner = static_cast<uint32_t>(job_owner_->ColumnInt(0));
  job_owner_->Reset();
  return owner;
}

absl::StatusOr<std::optional<uint32_t>> Catalog::JobOwner(absl::string_view job_id,
                                                          uint32_t legacy_owner) {
  // Every query's access check: on the queries' connection, never behind a commit. A claim is
  // committed before ClaimJob returns, so a job's first reader sees its owner.
  absl::MutexLock lock(&read_mu_);
  SqliteStatement& owner_of = *read_job_owner_;
  owner_of.BindText(1, job_id);
  owner_of.BindInt(2, legacy_owner);
  absl::StatusOr<bool> row = owner_of.Step();
  if (!row.ok()) return row.status();
  std::optional<uint32_t> owner;
  if (*row && !owner_of.ColumnIsNull(0)) owner = static_cast<uint32_t>(owner_of.ColumnInt(0));
  owner_of.Reset();
  return owner;
}

absl::StatusOr<absl::flat_hash_map<std::string, uint32_t>> Catalog::JobOwners(
    uint32_t legacy_owner) {
  absl::MutexLock lock(&read_mu_);  // the queries' connection: never waits for a commit
  absl::flat_hash_map<std::string, uint32_t> owners;
  job_owners_->BindInt(1, legacy_owner);
  while (true) {
    absl::StatusOr<bool> row = job_owners_->Step();
    if (!row.ok()) return row.status();
    if (!*row) return owners;
    owners[job_owners_->ColumnString(0)] = static_cast<uint32_t>(job_owners_->ColumnInt(1));
  }
}

absl::StatusOr<std::string> Catalog::KeepFirstTokenDigest(absl::string_view job_id, int32_t rank,
                                                          absl::string_view session_id,
                                                          absl::string_view digest) {
  WriteLock lock(this);  // two hellos of one session: the first digest stays
  keep_token_->BindText(1, job_id);
  keep_token_->BindInt(2, rank);
  keep_token_->BindText(3, session_id);
  keep_token_->BindBlob(4, digest);
  if (absl::Status s = keep_token_->Run(); !s.ok()) return s;
  token_of_->BindText(1, job_id);
  token_of_->BindInt(2, rank);
  token_of_->BindText(3, session_id);
  absl::StatusOr<bool> row = token_of_->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("catalog: a session token vanished as it was written");
  std::string kept(token_of_->ColumnText(0));
  token_of_->Reset();
  return kept;
}

absl::Status Catalog::DeleteJob(absl::string_view job_id) {
  // Rare (a prune), so prepared here rather than kept.
  static constexpr const char* kDeletes[] = {
      "DELETE FROM ranks WHERE job_id = ?",           "DELETE FROM rank_losses WHERE job_id = ?",
      "DELETE FROM rank_rejections WHERE job_id = ?", "DELETE FROM session_tokens WHERE job_id = ?",
      "DELETE FROM job_owners WHERE job_id = ?",      "DELETE FROM jobs WHERE job_id = ?"};
  WriteLock lock(this);  // serializes the connection between all streams
  const absl::Status deleted = InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const char* sql : kDeletes) {
      absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db_->Prepare(sql);
      if (!stmt.ok()) return stmt.status();
      (*stmt)->BindText(1, job_id);
      if (absl::Status s = (*stmt)->Run(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!deleted.ok()) return deleted;
  // Writes kept for the job would list it again (TouchJob): they go with it.
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = it->first.first == job_id ? pending_.erase(it) : std::next(it);
  }
  pending_left_.store(!pending_.empty(), std::memory_order_relaxed);
  return deleted;
}

}  // namespace flopscope::daemon
