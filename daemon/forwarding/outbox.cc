// The store-and-forward queue of a node daemon: batches committed here, waiting for the
// aggregator's acknowledgement, in <data_dir>/outbox.sqlite (schema/outbox.sql).
#include "daemon/forwarding/outbox.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/base/resume_token.h"
#include "daemon/store/rank_store.h"
#include "schema/schema_sql.h"

namespace flopscope::daemon::forwarding {
namespace {

std::string OutboxKey(const v1::SessionHello& hello) {
  return absl::StrCat(hello.job_id(), std::string(1, '\0'), hello.rank(), std::string(1, '\0'),
                      hello.session_id());
}

// A file made before batches carried their put time gets the column (its waiting batches count
// as put now: the lag is at least that old) and the index the lag reads.
absl::Status AddPutTime(SqliteDb& db) {
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db.ColumnNames("outbox_batches");
  if (!columns.ok()) return columns.status();
  if (!columns->contains("put_ns")) {
    const std::string add = absl::StrCat(
        "ALTER TABLE outbox_batches ADD COLUMN put_ns INTEGER NOT NULL DEFAULT 0; "
        "UPDATE outbox_batches SET put_ns = ",
        absl::GetCurrentTimeNanos(), ";");
    if (absl::Status s = db.Exec(add.c_str()); !s.ok()) return s;
  }
  return db.Exec("CREATE INDEX IF NOT EXISTS outbox_batches_put ON outbox_batches(put_ns)");
}

// A file made before dropped batches left a stub gets the column (no stub waits in it).
absl::Status AddStubSeq(SqliteDb& db) {
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db.ColumnNames("outbox_sessions");
  if (!columns.ok()) return columns.status();
  if (columns->contains("stub_seq")) return absl::OkStatus();
  return db.Exec("ALTER TABLE outbox_sessions ADD COLUMN stub_seq INTEGER NOT NULL DEFAULT 0");
}

// What stays of a dropped batch: its seq, its final flag and its loss counters, no records.
v1::Batch StubOf(const v1::Batch& batch) {
  v1::Batch stub;
  stub.set_seq(batch.seq());
  stub.set_final(batch.final());
  *stub.mutable_losses() = batch.losses();
  return stub;
}

// `later`'s stub merged with an earlier one of the same session: the higher seq, final if either
// was, each cause's counter at its maximum (they are cumulative).
void MergeStub(const v1::Batch& earlier, v1::Batch* later) {
  later->set_seq(std::max(later->seq(), earlier.seq()));
  later->set_final(later->final() || earlier.final());
  absl::flat_hash_map<int, uint64_t> records;
  for (const v1::LossCounter& loss : earlier.losses()) {
    records[loss.cause()] = std::max(records[loss.cause()], loss.records());
  }
  for (const v1::LossCounter& loss : later->losses()) {
    records[loss.cause()] = std::max(records[loss.cause()], loss.records());
  }
  later->clear_losses();
  for (const auto& [cause, count] : records) {
    v1::LossCounter* loss = later->add_losses();
    loss->set_cause(static_cast<v1::LossCause>(cause));
    loss->set_records(count);
  }
}

// The session's dropped records as `batch`'s FORWARD_DROPPED counter, added to one it carries
// from a node daemon below this one.
void AttachDropped(uint64_t dropped, v1::Batch* batch) {
  if (dropped == 0) return;
  for (v1::LossCounter& loss : *batch->mutable_losses()) {
    if (loss.cause() == v1::LOSS_CAUSE_FORWARD_DROPPED) {
      loss.set_records(loss.records() + dropped);
      return;
    }
  }
  v1::LossCounter* loss = batch->add_losses();
  loss->set_cause(v1::LOSS_CAUSE_FORWARD_DROPPED);
  loss->set_records(dropped);
}

OutboxSession SessionFromRow(const SqliteStatement& row, absl::Status* problem) {
  OutboxSession session;
  session.id = row.ColumnInt(0);
  const absl::string_view hello = row.ColumnText(1);
  if (!session.hello.ParseFromArray(hello.data(), static_cast<int>(hello.size()))) {
    *problem = absl::DataLossError(
        absl::StrCat("forwarding outbox: the hello of session row ", session.id,
                     " does not parse; delete outbox.sqlite to start forwarding afresh"));
  }
  session.owner_uid = static_cast<uint32_t>(row.ColumnInt(2));
  session.upstream_token = row.ColumnString(3);
  session.acked_seq = row.ColumnUint(4);
  return session;
}

}  // namespace

std::string OutboxPath(absl::string_view data_dir) {
  return absl::StrCat(data_dir, "/outbox.sqlite");
}

absl::StatusOr<std::unique_ptr<Outbox>> Outbox::Open(const std::string& path, int64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenWithSchema(path, schema::koutboxSql);
  if (!db.ok()) {
    return absl::Status(db.status().code(),
                        absl::StrCat("forwarding outbox ", path, ": ", db.status().message()));
  }
  if (absl::Status s = AddPutTime(**db); !s.ok()) return s;
  if (absl::Status s = AddStubSeq(**db); !s.ok()) return s;
  std::unique_ptr<Outbox> outbox(new Outbox(*std::move(db), max_bytes));
  absl::MutexLock lock(&outbox->mu_);
  if (absl::Status s = outbox->Prepare(); !s.ok()) return s;
  int64_t waiting = 0;
  absl::Status summed =
      outbox->db_->ForEachRow("SELECT COALESCE(SUM(length(batch)), 0) FROM outbox_batches",
                              [&waiting](const SqliteStatement& row) {
                                waiting = row.ColumnInt(0);
                                return absl::OkStatus();
                              });
  if (!summed.ok()) return summed;
  outbox->pending_bytes_ = waiting;
  return outbox;
}

absl::Status Outbox::Prepare() {
  return db_->PrepareAll({
      {&find_session_,
       "SELECT id, acked_seq FROM outbox_sessions WHERE job_id = ? AND rank = ? AND "
       "session_id = ?"},
      {&find_full_session_,
       "SELECT id, hello, owner_uid, upstream_token, acked_seq FROM outbox_sessions WHERE "
       "job_id = ? AND rank = ? AND session_id = ?"},
      {&insert_session_,
       "INSERT INTO outbox_sessions(job_id, rank, session_id, hello, owner_uid, upstream_token) "
       "VALUES (?, ?, ?, ?, ?, ?)"},
      {&insert_batch_,
       "INSERT OR IGNORE INTO outbox_batches(session, seq, put_ns, batch) VALUES (?, ?, ?, ?)"},
      {&pending_,
       "SELECT batch FROM outbox_batches WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?"},
      {&acked_bytes_,
       "SELECT COALESCE(SUM(length(batch)), 0) FROM outbox_batches WHERE session = ? AND "
       "seq <= ?"},
      {&delete_acked_, "DELETE FROM outbox_batches WHERE session = ? AND seq <= ?"},
      {&raise_watermark_, "UPDATE outbox_sessions SET acked_seq = MAX(acked_seq, ?) WHERE id = ?"},
      {&delete_batch_,
       "DELETE FROM outbox_batches WHERE session = ? AND seq = ? RETURNING length(batch)"},
      {&count_dropped_,
       "UPDATE outbox_sessions SET dropped_batches = dropped_batches + 1 WHERE id = ?"},
      {&is_waiting_, "SELECT 1 FROM outbox_batches WHERE session = ? AND seq = ?"},
      {&was_dropped_, "SELECT 1 FROM outbox_dropped WHERE session = ? AND seq = ?"},
      {&insert_dropped_,
       "INSERT OR IGNORE INTO outbox_dropped(session, seq, records) VALUES (?, ?, ?)"},
      {&dropped_records_, "SELECT COALESCE(SUM(records), 0) FROM outbox_dropped WHERE session = ?"},
      {&stub_seq_, "SELECT stub_seq FROM outbox_sessions WHERE id = ?"},
      {&take_batch_, "DELETE FROM outbox_batches WHERE session = ? AND seq = ? RETURNING batch"},
      {&set_stub_seq_, "UPDATE outbox_sessions SET stub_seq = ? WHERE id = ?"},
  });
}

absl::StatusOr<int64_t> Outbox::SessionFor(const v1::SessionHello& hello,
                                           const OwnerLookup& owner) {
  const std::string key = OutboxKey(hello);
  if (auto it = sessions_.find(key); it != sessions_.end()) return it->second;
  find_session_->BindText(1, hello.job_id());
  find_session_->BindInt(2, hello.rank());
  find_session_->BindText(3, hello.session_id());
  absl::StatusOr<bool> found = find_session_->Step();
  if (!found.ok()) return found.status();
  int64_t id = 0;
  uint64_t acked = 0;
  if (*found) {
    id = find_session_->ColumnInt(0);
    acked = find_session_->ColumnUint(1);
    find_session_->Reset();
  } else {
    absl::StatusOr<uint32_t> uid = owner();
    if (!uid.ok()) return uid.status();
    absl::StatusOr<std::string> token = NewResumeToken();
    if (!token.ok()) return token.status();
    const std::string stored = SerializeHelloForStorage(hello);
    insert_session_->BindText(1, hello.job_id());
    insert_session_->BindInt(2, hello.rank());
    insert_session_->BindText(3, hello.session_id());
    insert_session_->BindBlob(4, stored);
    insert_session_->BindInt(5, *uid);
    insert_session_->BindText(6, *token);
    if (absl::Status s = insert_session_->Run(); !s.ok()) return s;
    id = sqlite3_last_insert_rowid(db_->handle());
  }
  sessions_[key] = id;
  watermarks_[id] = acked;
  return id;
}

absl::Status Outbox::Put(const v1::SessionHello& hello, const v1::Batch& batch,
                         const OwnerLookup& owner) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int64_t> session = SessionFor(hello, owner);
  if (!session.ok()) return session.status();
  if (batch.seq() <= watermarks_[*session]) return absl::OkStatus();  // forwarded already
  // Dropped before (a producer's resend after this node lost its Ack): counted already, and the
  // stub may hold its seq.
  absl::StatusOr<bool> dropped = Holds(*was_dropped_, *session, batch.seq());
  if (!dropped.ok()) return dropped.status();
  if (*dropped) return absl::OkStatus();
  const std::string bytes = batch.SerializeAsString();
  if (pending_bytes_ + static_cast<int64_t>(bytes.size()) > max_bytes_) {
    absl::StatusOr<bool> waiting = Holds(*is_waiting_, *session, batch.seq());
    if (!waiting.ok()) return waiting.status();
    if (*waiting) return absl::OkStatus();  // a resend of a batch that waits already
    if (absl::Status s = Drop(*session, batch); !s.ok()) return s;
    return absl::ResourceExhaustedError(absl::StrCat(
        "forwarding outbox full (", pending_bytes_, " bytes waiting, at most ", max_bytes_,
        "): batch ", batch.seq(), " of ", hello.job_id(), " rank ", hello.rank(),
        " stays on this node only; is the aggregator reachable? (--outbox-max-mb raises it)"));
  }
  insert_batch_->BindInt(1, *session);
  insert_batch_->BindUint(2, batch.seq());
  insert_batch_->BindInt(3, absl::GetCurrentTimeNanos());
  insert_batch_->BindBlob(4, bytes);
  if (absl::Status s = insert_batch_->Run(); !s.ok()) return s;
  if (sqlite3_changes(db_->handle()) > 0) pending_bytes_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status Outbox::CountDropped(int64_t session) {
  count_dropped_->BindInt(1, session);
  return count_dropped_->Run();
}

absl::StatusOr<bool> Outbox::Holds(SqliteStatement& query, int64_t session, uint64_t seq) {
  query.BindInt(1, session);
  query.BindUint(2, seq);
  absl::StatusOr<bool> row = query.Step();
  query.Reset();
  return row;
}

absl::Status Outbox::Drop(int64_t session, const v1::Batch& batch) {
  if (absl::Status s = db_->Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Cleanup rollback = [db = db_.get()] { db->Exec("ROLLBACK").IgnoreError(); };
  insert_dropped_->BindInt(1, session);
  insert_dropped_->BindUint(2, batch.seq());
  insert_dropped_->BindUint(3, ProducerRecordCount(batch));
  if (absl::Status s = insert_dropped_->Run(); !s.ok()) return s;
  if (absl::Status s = CountDropped(session); !s.ok()) return s;
  int64_t bytes_delta = 0;
  if (absl::Status s = KeepStub(session, batch, &bytes_delta); !s.ok()) return s;
  if (absl::Status s = db_->Exec("COMMIT"); !s.ok()) return s;
  std::move(rollback).Cancel();
  pending_bytes_ += bytes_delta;
  return absl::OkStatus();
}

absl::Status Outbox::KeepStub(int64_t session, const v1::Batch& batch, int64_t* bytes_delta) {
  v1::Batch stub = StubOf(batch);
  stub_seq_->BindInt(1, session);
  absl::StatusOr<bool> row = stub_seq_->Step();
  if (!row.ok()) return row.status();
  const uint64_t earlier_seq = *row ? stub_seq_->ColumnUint(0) : 0;
  stub_seq_->Reset();
  if (earlier_seq != 0) {
    // Still waiting (not sent and acknowledged yet): merged into the new one, which replaces it.
    take_batch_->BindInt(1, session);
    take_batch_->BindUint(2, earlier_seq);
    absl::StatusOr<bool> taken = take_batch_->Step();
    if (!taken.ok()) return taken.status();
    if (*taken) {
      const absl::string_view bytes = take_batch_->ColumnText(0);
      v1::Batch earlier;
      if (earlier.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        MergeStub(earlier, &stub);
      }
      *bytes_delta -= static_cast<int64_t>(bytes.size());
      take_batch_->Reset();
    }
  }
  const std::string bytes = stub.SerializeAsString();
  insert_batch_->BindInt(1, session);
  insert_batch_->BindUint(2, stub.seq());
  insert_batch_->BindInt(3, absl::GetCurrentTimeNanos());
  insert_batch_->BindBlob(4, bytes);
  if (absl::Status s = insert_batch_->Run(); !s.ok()) return s;
  if (sqlite3_changes(db_->handle()) > 0) *bytes_delta += static_cast<int64_t>(bytes.size());
  set_stub_seq_->BindUint(1, stub.seq());
  set_stub_seq_->BindInt(2, session);
  return set_stub_seq_->Run();
}

absl::StatusOr<uint64_t> Outbox::DroppedRecords(int64_t session) {
  dropped_records_->BindInt(1, session);
  absl::StatusOr<bool> row = dropped_records_->Step();
  if (!row.ok()) return row.status();
  const uint64_t records = *row ? dropped_records_->ColumnUint(0) : 0;
  dropped_records_->Reset();
  return records;
}

absl::StatusOr<std::vector<OutboxSession>> Outbox::SessionsWithWork() {
  absl::MutexLock lock(&mu_);
  std::vector<OutboxSession> sessions;
  absl::Status s = db_->ForEachRow(
      "SELECT id, hello, owner_uid, upstream_token, acked_seq FROM outbox_sessions s WHERE "
      "EXISTS (SELECT 1 FROM outbox_batches b WHERE b.session = s.id) ORDER BY id",
      [&](const SqliteStatement& row) {
        absl::Status problem;
        sessions.push_back(SessionFromRow(row, &problem));
        return problem;
      });
  if (!s.ok()) return s;
  return sessions;
}

absl::StatusOr<std::optional<OutboxSession>> Outbox::Find(absl::string_view job_id, int32_t rank,
                                                          absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  find_full_session_->BindText(1, job_id);
  find_full_session_->BindInt(2, rank);
  find_full_session_->BindText(3, session_id);
  absl::StatusOr<bool> row = find_full_session_->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  absl::Status problem;
  OutboxSession session = SessionFromRow(*find_full_session_, &problem);
  find_full_session_->Reset();
  if (!problem.ok()) return problem;
  return session;
}

absl::StatusOr<std::vector<v1::Batch>> Outbox::Pending(int64_t session, uint64_t after_seq,
                                                       size_t max_batches) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<uint64_t> dropped = DroppedRecords(session);
  if (!dropped.ok()) return dropped.status();
  pending_->BindInt(1, session);
  pending_->BindUint(2, after_seq);
  pending_->BindInt(3, static_cast<int64_t>(max_batches));
  std::vector<v1::Batch> batches;
  while (true) {
    absl::StatusOr<bool> row = pending_->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    const absl::string_view bytes = pending_->ColumnText(0);
    v1::Batch& batch = batches.emplace_back();
    if (!batch.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      pending_->Reset();
      return absl::DataLossError(
          absl::StrCat("forwarding outbox: a batch of session row ", session, " does not parse"));
    }
    AttachDropped(*dropped, &batch);
  }
  return batches;
}

absl::Status Outbox::Acknowledge(int64_t session, uint64_t committed_seq) {
  absl::MutexLock lock(&mu_);
  acked_bytes_->BindInt(1, session);
  acked_bytes_->BindUint(2, committed_seq);
  absl::StatusOr<bool> row = acked_bytes_->Step();
  if (!row.ok()) return row.status();
  const int64_t freed = *row ? acked_bytes_->ColumnInt(0) : 0;
  acked_bytes_->Reset();
  delete_acked_->BindInt(1, session);
  delete_acked_->BindUint(2, committed_seq);
  if (absl::Status s = delete_acked_->Run(); !s.ok()) return s;
  raise_watermark_->BindUint(1, committed_seq);
  raise_watermark_->BindInt(2, session);
  if (absl::Status s = raise_watermark_->Run(); !s.ok()) return s;
  pending_bytes_ -= freed;
  if (auto it = watermarks_.find(session); it != watermarks_.end()) {
    it->second = std::max(it->second, committed_seq);
  }
  return absl::OkStatus();
}

absl::Status Outbox::DropRefused(int64_t session, uint64_t seq) {
  absl::MutexLock lock(&mu_);
  delete_batch_->BindInt(1, session);
  delete_batch_->BindUint(2, seq);
  absl::StatusOr<bool> row = delete_batch_->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::OkStatus();  // not waiting (acknowledged meanwhile)
  pending_bytes_ -= delete_batch_->ColumnInt(0);
  delete_batch_->Reset();
  return CountDropped(session);
}

absl::StatusOr<OutboxTotals> Outbox::Totals() {
  absl::MutexLock lock(&mu_);
  OutboxTotals totals;
  totals.pending_bytes = pending_bytes_;
  absl::Status s = db_->ForEachRow(
      "SELECT (SELECT COUNT(*) FROM outbox_batches), "
      "(SELECT COALESCE(SUM(dropped_batches), 0) FROM outbox_sessions), "
      "(SELECT MIN(put_ns) FROM outbox_batches), "
      "(SELECT COALESCE(SUM(records), 0) FROM outbox_dropped)",
      [&](const SqliteStatement& row) {
        totals.pending_batches = row.ColumnInt(0);
        totals.dropped_batches = row.ColumnInt(1);
        if (totals.pending_batches > 0) totals.oldest_put_ns = row.ColumnInt(2);
        totals.dropped_records = row.ColumnInt(3);
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return totals;
}

}  // namespace flopscope::daemon::forwarding
