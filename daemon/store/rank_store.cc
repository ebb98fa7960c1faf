#include "daemon/store/rank_store.h"

#include <signal.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metadata_keys.h"
#include "daemon/base/logger.h"
#include "daemon/base/resume_token.h"
#include "daemon/store/rank_schema.h"
#include "daemon/validate/batch_validator.h"
#include "schema/schema_sql.h"

namespace flopscope::daemon {
namespace {

// The key as SQLite binds it (SQLITE_STATIC: the literal outlives every statement).
absl::string_view CutShortKey() {
  return absl::string_view(kEndSignalCutShortKey.data(), kEndSignalCutShortKey.size());
}

struct StoredPath {
  uint64_t id;
  uint64_t parent_id;
  std::string domain;
  std::string name;
};

// Rebuilds the validator's view of stored paths. Parents were committed before their children,
// but ids need not be ordered that way, so add in passes until nothing more can be placed (rows
// whose parent is missing would only be there if the file was edited by hand: left out).
void AddStoredPaths(const std::vector<StoredPath>& rows, SessionDefinitions* definitions) {
  std::vector<bool> placed(rows.size(), false);
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (placed[i]) continue;
      const StoredPath& row = rows[i];
      uint32_t parent_depth = 0;
      if (row.parent_id != 0) {
        const PathDefinition* parent = definitions->FindPath(row.parent_id);
        if (parent == nullptr) continue;
        parent_depth = parent->depth;
      }
      definitions->AddPath(row.id, row.parent_id, parent_depth, row.domain, row.name);
      placed[i] = progress = true;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> RankStore::OpenDatabase(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenWithSchema(path, schema::krankSql);
  if (!db.ok()) return db.status();
  if (absl::Status s = RankSchema::Upgrade(**db); !s.ok()) return s;
  // The writer only appends, and its last pages are still in the OS's cache: SQLite's default
  // 2 MiB page cache per file was 130 MB of the daemon's memory for a 64-rank job (issue 15).
  const std::string cache = absl::StrCat("PRAGMA cache_size=-", kWriterCacheKib);
  if (absl::Status s = (*db)->Exec(cache.c_str()); !s.ok()) return s;
  return db;
}

absl::StatusOr<std::unique_ptr<RankStore>> RankStore::Open(const std::string& path,
                                                           const FoldPolicy& fold) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = OpenDatabase(path);
  if (!db.ok()) return db.status();
  absl::StatusOr<std::unique_ptr<BatchWriter>> writer = BatchWriter::Prepare(**db);
  if (!writer.ok()) return writer.status();
  std::unique_ptr<RankStore> store(new RankStore(path, *std::move(db), *std::move(writer)));
  {
    absl::MutexLock lock(&store->mu_);  // uncontended: nobody else has the store yet
    store->fold_ = fold;
    absl::Status status = store->PrepareStatements();
    if (status.ok()) status = store->LoadTotals();
    if (!status.ok()) return status;
  }
  return store;
}

RankStore::RankStore(std::string path, std::unique_ptr<SqliteDb> db,
                     std::unique_ptr<BatchWriter> writer)
    : path_(std::move(path)), db_(std::move(db)), writer_(std::move(writer)) {}

RankStore::~RankStore() = default;

absl::Status RankStore::PrepareStatements() {
  return db_->PrepareAll({
      // IMMEDIATE takes the write lock up front, so a commit never fails half-way on a reader.
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&find_session_, "SELECT sid, last_seq, start_time_ns FROM sessions WHERE session_id = ?"},
      {&insert_session_,
       "INSERT INTO sessions(session_id, job_id, rank, local_rank, world_size, host, pid, "
       "injector_version, start_time_ns, command, gpu_status, hello, first_seen_ns, "
       "last_seen_ns) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)"},
      {&touch_session_, "UPDATE sessions SET last_seen_ns = ? WHERE sid = ?"},
      {&sum_losses_, "SELECT cause, SUM(records) FROM losses GROUP BY cause"},
      {&clear_ended_, "DELETE FROM losses WHERE sid = ? AND cause = 12"},
      {&write_ids_, "INSERT OR REPLACE INTO range_instance_ids(sid, lo, hi) VALUES(?,?,?)"},
      {&delete_ids_, "DELETE FROM range_instance_ids WHERE sid = ? AND lo = ?"},
  });
}

absl::Status RankStore::LoadTotals() {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db_->Prepare(
      "SELECT COUNT(*), COALESCE(SUM(range_events), 0), COALESCE(SUM(kernels), 0) FROM sessions");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    totals_.sessions = (*stmt)->ColumnUint(0);
    totals_.range_events = (*stmt)->ColumnUint(1);
    totals_.kernels = (*stmt)->ColumnUint(2);
  }
  (*stmt)->Reset();
  return LoadLosses();
}

absl::Status RankStore::LoadLosses() {
  std::map<int, uint64_t> losses;
  while (true) {
    absl::StatusOr<bool> row = sum_losses_->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    losses[static_cast<int>(sum_losses_->ColumnInt(0))] = sum_losses_->ColumnUint(1);
  }
  totals_.losses = std::move(losses);
  return absl::OkStatus();
}

absl::StatusOr<SessionHandle> RankStore::OpenSession(const v1::SessionHello& hello) {
  absl::MutexLock lock(&mu_);  // serializes the connection and the session table
  const int64_t now_ns = absl::GetCurrentTimeNanos();
  find_session_->BindText(1, hello.session_id());
  absl::StatusOr<bool> found = find_session_->Step();
  if (!found.ok()) return found.status();
  if (!*found) {
    absl::StatusOr<int64_t> sid = InsertSession(hello, now_ns);
    if (!sid.ok()) return sid.status();
    sessions_[*sid].start_time_ns = hello.start_time_ns();
    ++totals_.sessions;
    return SessionHandle{*sid, 0};
  }
  const int64_t sid = find_session_->ColumnInt(0);
  const uint64_t stored_seq = find_session_->ColumnUint(1);
  const int64_t stored_start_ns = find_session_->ColumnInt(2);  // the first hello's
  find_session_->Reset();
  if (!sessions_.contains(sid)) {
    Session session;
    session.last_seq = stored_seq;
    session.start_time_ns = stored_start_ns;
    if (absl::Status s = LoadDefinitions(sid, &session.definitions); !s.ok()) return s;
    if (absl::Status s = LoadInstanceIds(sid, &session.instance_ids); !s.ok()) return s;
    sessions_[sid] = std::move(session);
  }
  touch_session_->BindInt(1, now_ns);
  touch_session_->BindInt(2, sid);
  if (absl::Status s = touch_session_->Run(); !s.ok()) return s;
  // Streaming again: no longer "ended without a final batch" (EndStream flags it anew).
  static_assert(v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL == 12);
  clear_ended_->BindInt(1, sid);
  if (absl::Status s = clear_ended_->Run(); !s.ok()) return s;
  if (sqlite3_changes(db_->handle()) > 0) LoadLosses().IgnoreError();
  return SessionHandle{sid, sessions_[sid].last_seq};
}

absl::StatusOr<int64_t> RankStore::InsertSession(const v1::SessionHello& hello, int64_t now_ns) {
  const std::string serialized = SerializeHelloForStorage(hello);  // never the resume token
  SqliteStatement& stmt = *insert_session_;
  stmt.BindText(1, hello.session_id());
  stmt.BindText(2, hello.job_id());
  stmt.BindInt(3, hello.rank());
  stmt.BindInt(4, hello.local_rank());
  stmt.BindInt(5, hello.world_size());
  stmt.BindText(6, hello.host());
  stmt.BindInt(7, hello.pid());
  stmt.BindText(8, hello.injector_version());
  stmt.BindInt(9, hello.start_time_ns());
  stmt.BindText(10, hello.command());
  stmt.BindText(11, hello.gpu_status());
  stmt.BindBlob(12, serialized);
  stmt.BindInt(13, now_ns);
  stmt.BindInt(14, now_ns);
  if (absl::Status s = stmt.Run(); !s.ok()) return s;
  return sqlite3_last_insert_rowid(db_->handle());
}

absl::Status RankStore::LoadDefinitions(int64_t sid, SessionDefinitions* definitions) {
  // Only after a daemon restart or store reopen: prepared here rather than kept.
  absl::StatusOr<std::unique_ptr<SqliteStatement>> paths =
      db_->Prepare("SELECT id, parent_id, domain, name FROM range_paths WHERE sid = ? ORDER BY id");
  if (!paths.ok()) return paths.status();
  (*paths)->BindInt(1, sid);
  std::vector<StoredPath> rows;
  while (true) {
    absl::StatusOr<bool> row = (*paths)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    rows.push_back({(*paths)->ColumnUint(0), (*paths)->ColumnUint(1), (*paths)->ColumnString(2),
                    (*paths)->ColumnString(3)});
  }
  AddStoredPaths(rows, definitions);

  absl::StatusOr<std::unique_ptr<SqliteStatement>> strings =
      db_->Prepare("SELECT id, value FROM strings WHERE sid = ?");
  if (!strings.ok()) return strings.status();
  (*strings)->BindInt(1, sid);
  while (true) {
    absl::StatusOr<bool> row = (*strings)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    definitions->AddString(static_cast<uint32_t>((*strings)->ColumnInt(0)),
                           (*strings)->ColumnText(1));
  }
  return absl::OkStatus();
}

absl::Status RankStore::LoadInstanceIds(int64_t sid, InstanceIdSet* ids) {
  // Only when a session is resumed after a daemon restart or store reopen (or a commit failed).
  // `sid` is the file's own integer key, never input: formatted into the one-off query.
  return db_->ForEachRow(absl::StrCat("SELECT lo, hi FROM range_instance_ids WHERE sid = ", sid),
                         [ids](const SqliteStatement& row) {
                           ids->Insert({row.ColumnUint(0), row.ColumnUint(1)});
                           return absl::OkStatus();
                         });
}

namespace {

// INVALID_ARGUMENT naming the first range of `batch` whose instance id `stored` holds: a later
// batch repeating an occurrence (a resent batch keeps its seq and is dropped before this).
absl::Status RefuseStoredIds(const v1::Batch& batch, const InstanceIdSet& stored) {
  for (int i = 0; i < batch.ranges_size(); ++i) {
    if (!stored.Contains(batch.ranges(i).instance_id())) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "batch seq ", batch.seq(), ": ranges[", i, "]: instance_id ", batch.ranges(i).instance_id(),
        " was stored by an earlier batch of this session (an occurrence is sent "
        "once; a resent batch keeps its seq)"));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> RangeIds(const v1::Batch& batch) {
  std::vector<uint64_t> ids;
  ids.reserve(batch.ranges_size());
  for (const v1::RangeEvent& range : batch.ranges()) ids.push_back(range.instance_id());
  return ids;
}

}  // namespace

absl::Status RankStore::Commit(int64_t sid, const v1::Batch& batch, CommitOutcome* outcome,
                               BatchOrigin origin) {
  absl::MutexLock lock(&mu_);  // one writer per file; also guards sessions_ and totals_
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", sid, " was not opened in ", path_));
  }
  Session& session = it->second;
  if (batch.seq() != 0 && batch.seq() <= session.last_seq) {
    if (outcome != nullptr) *outcome = CommitOutcome{session.last_seq, true};
    return absl::OkStatus();
  }
  SessionDefinitions added;
  BatchValidator validator(session.definitions, absl::Now(), session.start_time_ns, origin);
  if (absl::Status s = validator.Validate(batch, &added); !s.ok()) return s;
  if (absl::Status s = RefuseStoredIds(batch, session.instance_ids); !s.ok()) return s;
  // The ids go in ahead of the commit (a copy would cost the whole set per batch, and a
  // producer with sparse ids holds many intervals); a failed commit reads them back.
  const InstanceIdSet::Change new_ids = session.instance_ids.Add(RangeIds(batch));
  if (absl::Status s = WriteInTransaction(sid, batch, session, new_ids); !s.ok()) {
    session.instance_ids = InstanceIdSet();
    if (absl::Status reload = LoadInstanceIds(sid, &session.instance_ids); !reload.ok()) {
      LogWarning(
          "cannot read back the range instance ids of session ", sid, " in ", path_,
          " (repeats of earlier occurrences go unnoticed until it is resumed): ", reload.message());
    }
    return s;
  }

  // Committed: only now does memory follow the database (the ids did already).
  session.definitions.Merge(added);
  session.last_seq = batch.seq();
  totals_.range_events += static_cast<uint64_t>(batch.ranges_size());
  totals_.kernels += KernelsOnly(batch);  // memcpy/memset apart, as in every view
  // The loss table is tiny; when re-reading it fails, the totals just stay a batch behind.
  if (batch.losses_size() > 0) LoadLosses().IgnoreError();
  if (outcome != nullptr) *outcome = CommitOutcome{session.last_seq, false};
  MaybeFold(static_cast<uint64_t>(batch.ranges_size()) + batch.kernels_size());
  return absl::OkStatus();
}

void RankStore::MaybeFold(uint64_t records) {
  if (fold_.keep_raw_steps <= 0) return;
  records_since_fold_ += records;
  if (records_since_fold_ < fold_.check_every_records) return;
  records_since_fold_ = 0;
  absl::StatusOr<FoldOutcome> folded = StepFolder::Fold(*db_, fold_);
  if (!folded.ok()) {
    LogWarning("cannot fold old steps of ", path_, " (they stay raw): ", folded.status().message());
  } else if (folded->more) {
    records_since_fold_ = fold_.check_every_records;  // the next commit folds the next steps
  }
}

absl::Status RankStore::WriteInTransaction(int64_t sid, const v1::Batch& batch,
                                           const Session& session,
                                           const InstanceIdSet::Change& new_ids) {
  if (absl::Status s = begin_->Run(); !s.ok()) return s;
  absl::Status status =
      writer_->Write(sid, batch, session.definitions, absl::GetCurrentTimeNanos());
  if (status.ok()) status = WriteInstanceIds(sid, new_ids);
  if (status.ok()) status = commit_->Run();
  // SQLite already rolled back on some errors (disk full, I/O): only roll back an open one.
  if (!status.ok() && sqlite3_get_autocommit(db_->handle()) == 0) {
    rollback_->Run().IgnoreError();
  }
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("batch seq ", batch.seq(), " not stored: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status RankStore::EndStream(int64_t sid, const StreamTally& tally) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<SqliteStatement>> final_of =
      db_->Prepare("SELECT final FROM sessions WHERE sid = ?");
  if (!final_of.ok()) return final_of.status();
  (*final_of)->BindInt(1, sid);
  absl::StatusOr<bool> row = (*final_of)->Step();
  if (!row.ok()) return row.status();
  const bool final = *row && (*final_of)->ColumnInt(0) != 0;
  (*final_of)->Reset();
  uint64_t not_arrived = 0;
  uint64_t killed = 0;
  if (!final) {
    absl::StatusOr<uint64_t> missing = NotArrivedAfter(sid, tally);
    if (!missing.ok()) return missing.status();
    not_arrived = *missing;
  }
  if (!final && tally.made_known) {
    absl::StatusOr<uint64_t> in_buffers = KilledAfter(sid, tally.made, not_arrived);
    if (!in_buffers.ok()) return in_buffers.status();
    killed = *in_buffers;
  }
  if (absl::Status s = begin_->Run(); !s.ok()) return s;
  absl::Status status = SetEndCounts(sid, final, not_arrived, tally.made_known, killed);
  if (status.ok()) status = SetCutShortSignal(sid, final, tally);
  if (status.ok()) status = commit_->Run();
  if (!status.ok() && sqlite3_get_autocommit(db_->handle()) == 0) rollback_->Run().IgnoreError();
  if (!status.ok()) return status;
  return LoadLosses();
}

absl::StatusOr<uint64_t> RankStore::StoredRecords(int64_t sid) {
  // Only when a stream ends without its final batch: not worth keeping prepared.
  absl::StatusOr<std::unique_ptr<SqliteStatement>> count = db_->Prepare(
      "SELECT (SELECT range_events FROM sessions WHERE sid = ?1) + "
      "(SELECT COUNT(*) FROM kernels WHERE sid = ?1) + "
      "(SELECT COALESCE(SUM(count), 0) FROM kernel_folds WHERE sid = ?1) + "
      "(SELECT COUNT(*) FROM metadata WHERE sid = ?1 AND key != ?2) + "
      "(SELECT COUNT(*) FROM kernel_flops WHERE sid = ?1) + "
      "(SELECT COUNT(*) FROM counter_windows WHERE sid = ?1)");
  if (!count.ok()) return count.status();
  (*count)->BindInt(1, sid);
  (*count)->BindText(2, CutShortKey());  // the daemon's row, not a record
  absl::StatusOr<bool> row = (*count)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*count)->ColumnUint(0) : 0;
}

absl::StatusOr<uint64_t> RankStore::NotArrivedAfter(int64_t sid, const StreamTally& tally) {
  if (tally.announced > 0) {
    absl::StatusOr<uint64_t> stored = StoredRecords(sid);
    if (!stored.ok()) return stored.status();
    return tally.announced > *stored ? tally.announced - *stored : 0;
  }
  // No announcement on this stream: what an earlier stream counted, less what this one brought.
  absl::StatusOr<std::unique_ptr<SqliteStatement>> earlier =
      db_->Prepare("SELECT records FROM losses WHERE sid = ? AND cause = 11");
  if (!earlier.ok()) return earlier.status();
  (*earlier)->BindInt(1, sid);
  absl::StatusOr<bool> row = (*earlier)->Step();
  if (!row.ok()) return row.status();
  const uint64_t before = *row ? (*earlier)->ColumnUint(0) : 0;
  return before > tally.received ? before - tally.received : 0;
}

absl::StatusOr<uint64_t> RankStore::KilledAfter(int64_t sid, uint64_t made, uint64_t not_arrived) {
  static_assert(v1::LOSS_CAUSE_DAEMON_UNREACHABLE == 2 && v1::LOSS_CAUSE_REJECTED == 3 &&
                v1::LOSS_CAUSE_EXIT_UNDELIVERED == 9);
  absl::StatusOr<uint64_t> stored = StoredRecords(sid);
  if (!stored.ok()) return stored.status();
  // The causes a record can meet after a thread buffer accepted it (BUFFER_FULL and the range
  // tracker's causes are counted instead of making a record).
  absl::StatusOr<std::unique_ptr<SqliteStatement>> lost = db_->Prepare(
      "SELECT COALESCE(SUM(records), 0) FROM losses WHERE sid = ? AND cause IN (2, 3, 9)");
  if (!lost.ok()) return lost.status();
  (*lost)->BindInt(1, sid);
  absl::StatusOr<bool> row = (*lost)->Step();
  if (!row.ok()) return row.status();
  uint64_t accounted = *row ? (*lost)->ColumnUint(0) : 0;
  for (uint64_t part : {*stored, not_arrived}) {
    if (__builtin_add_overflow(accounted, part, &accounted)) return 0;  // all accounted for
  }
  return made > accounted ? made - accounted : 0;
}

absl::Status RankStore::SetEndCounts(int64_t sid, bool final, uint64_t not_arrived, bool made_known,
                                     uint64_t killed) {
  static_assert(v1::LOSS_CAUSE_NOT_ARRIVED == 11 && v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL == 12 &&
                v1::LOSS_CAUSE_KILLED == 13);
  // KILLED is recounted only by a stream that knows what was made (or cleared by a final batch):
  // a later stream that does not know it leaves the figure as it is.
  absl::StatusOr<std::unique_ptr<SqliteStatement>> clear = db_->Prepare(
      "DELETE FROM losses WHERE sid = ?1 AND (cause IN (11, 12) OR (cause = 13 AND ?2))");
  if (!clear.ok()) return clear.status();
  (*clear)->BindInt(1, sid);
  (*clear)->BindInt(2, final || made_known ? 1 : 0);
  if (absl::Status s = (*clear)->Run(); !s.ok()) return s;
  if (final) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<SqliteStatement>> insert = db_->Prepare(
      "INSERT INTO losses(sid, cause, records) SELECT ?1, 12, 1 UNION ALL "
      "SELECT ?1, 11, ?2 WHERE ?2 > 0 UNION ALL SELECT ?1, 13, ?3 WHERE ?3 > 0");
  if (!insert.ok()) return insert.status();
  (*insert)->BindInt(1, sid);
  (*insert)->BindUint(2, not_arrived);
  (*insert)->BindUint(3, killed);
  return (*insert)->Run();
}

absl::Status RankStore::SetCutShortSignal(int64_t sid, bool final, const StreamTally& tally) {
  // Only a stream that read the made-counts file (or a final batch) says anything new.
  if (!final && !tally.made_known) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<SqliteStatement>> clear =
      db_->Prepare("DELETE FROM metadata WHERE sid = ? AND key = ?");
  if (!clear.ok()) return clear.status();
  (*clear)->BindInt(1, sid);
  (*clear)->BindText(2, CutShortKey());
  if (absl::Status s = (*clear)->Run(); !s.ok()) return s;
  if (final || (tally.end_signal != SIGINT && tally.end_signal != SIGTERM)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<SqliteStatement>> insert =
      db_->Prepare("INSERT INTO metadata(sid, time_ns, key, value) VALUES(?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  (*insert)->BindInt(1, sid);
  (*insert)->BindInt(2, absl::GetCurrentTimeNanos());
  (*insert)->BindText(3, CutShortKey());
  (*insert)->BindText(4, tally.end_signal == SIGINT ? "SIGINT" : "SIGTERM");
  return (*insert)->Run();
}

RankTotals RankStore::Totals() const {
  absl::MutexLock lock(&mu_);  // totals_ changes under commits
  return totals_;
}

absl::Status RankStore::WriteInstanceIds(int64_t sid, const InstanceIdSet::Change& change) {
  for (uint64_t lo : change.removed) {
    delete_ids_->BindInt(1, sid);
    delete_ids_->BindUint(2, lo);
    if (absl::Status s = delete_ids_->Run(); !s.ok()) return s;
  }
  for (const auto& [lo, hi] : change.written) {
    write_ids_->BindInt(1, sid);
    write_ids_->BindUint(2, lo);
    write_ids_->BindUint(3, hi);
    if (absl::Status s = write_ids_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
