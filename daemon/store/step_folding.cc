// Folds the old steps of a rank file into kernel_folds and range_folds (step_folding.h).
#include "daemon/store/step_folding.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "daemon/store/range_fold_codec.h"
#include "daemon/store/step_index.h"

namespace flopscope::daemon {
namespace {

// Runs a one-off statement with `value` bound to ?1.
absl::Status RunWithValue(SqliteDb& db, const char* sql, int64_t value) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, value);
  return (*stmt)->Run();
}

// The uncounted kernels of the prefix (rowid <= ?1), grouped exactly as RankReader groups raw
// kernels for `report --kernels`.
constexpr char kFoldKernels[] =
    "INSERT INTO kernel_folds(sid, path_id, kind, name_id, count, total_ns, min_ns, max_ns, "
    "bytes) SELECT sid, path_id, kind, name_id, COUNT(*), SUM(end_ns - start_ns), "
    "MIN(end_ns - start_ns), MAX(end_ns - start_ns), SUM(bytes) FROM kernels "
    "WHERE rowid <= ?1 AND counted = 0 GROUP BY sid, path_id, kind, name_id "
    "ON CONFLICT(sid, path_id, kind, name_id) DO UPDATE SET count = count + excluded.count, "
    "total_ns = total_ns + excluded.total_ns, min_ns = MIN(min_ns, excluded.min_ns), "
    "max_ns = MAX(max_ns, excluded.max_ns), bytes = bytes + excluded.bytes";

// The last rowid of the commit-order prefix of a table's rows that all ended before ?1. Rows are
// committed about in time order, so the scan stops about where the prefix does: a fold reads
// what it folds, not the raw window (there is no index on end_ns, to keep ingest fast).
constexpr char kLastKernelRowid[] =
    "SELECT COALESCE((SELECT rowid FROM kernels WHERE end_ns >= ?1 ORDER BY rowid LIMIT 1) - 1, "
    "(SELECT MAX(rowid) FROM kernels), 0)";
constexpr char kLastRangeRowid[] =
    "SELECT COALESCE((SELECT rowid FROM range_events WHERE end_ns >= ?1 ORDER BY rowid LIMIT 1) "
    "- 1, (SELECT MAX(rowid) FROM range_events), 0)";

absl::StatusOr<int64_t> LastPrefixRowid(SqliteDb& db, const char* sql, int64_t horizon_ns) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> last = db.Prepare(sql);
  if (!last.ok()) return last.status();
  (*last)->BindInt(1, horizon_ns);
  absl::StatusOr<bool> row = (*last)->Step();
  if (!row.ok()) return row.status();
  const int64_t rowid = *row ? (*last)->ColumnInt(0) : 0;
  (*last)->Reset();
  return rowid;
}

// The prefix, each event with its occurrence's kernels when it had some.
constexpr char kPrefix[] =
    "SELECT e.sid, e.path_id, e.instance_id, e.parent_instance_id, e.thread_id, e.start_ns, "
    "e.end_ns, e.kind, e.counted, s.path_id, s.kernels, s.first_start_ns, s.last_end_ns, "
    "s.busy_ns FROM range_events AS e LEFT JOIN instance_stats AS s "
    "ON s.sid = e.sid AND s.instance_id = e.instance_id WHERE e.rowid <= ?1 ORDER BY e.rowid";

FoldedRange ToFolded(const SqliteStatement& row) {
  FoldedRange event;
  event.sid = row.ColumnInt(0);
  event.path_id = row.ColumnUint(1);
  event.instance_id = row.ColumnUint(2);
  event.parent_instance_id = row.ColumnUint(3);
  event.thread_id = row.ColumnUint(4);
  event.start_ns = row.ColumnInt(5);
  event.end_ns = row.ColumnInt(6);
  event.kind = static_cast<int32_t>(row.ColumnInt(7));
  event.counted = row.ColumnInt(8) != 0;
  event.has_stats = !row.ColumnIsNull(9);
  if (event.has_stats) {
    event.stats = InstanceActivity{row.ColumnUint(9), row.ColumnUint(10), row.ColumnInt(11),
                                   row.ColumnInt(12), row.ColumnInt(13)};
  }
  return event;
}

// Collects folded events and writes them out as range_folds rows of kMaxEventsPerFold at most.
class FoldSink {
 public:
  FoldSink(SqliteDb& db, int64_t horizon_ns) : db_(db), horizon_ns_(horizon_ns) {}

  absl::Status Add(FoldedRange event) {
    // An instance's kernels count once, as RankReader reads instance_stats once per key.
    if (event.has_stats && !attached_.insert({event.sid, event.instance_id}).second) {
      event.has_stats = false;
      event.stats = InstanceActivity{};
    }
    if (event.has_stats) ++instance_rows_;
    pending_.push_back(event);
    if (pending_.size() < kMaxEventsPerFold) return absl::OkStatus();
    return Flush();
  }

  absl::Status Flush() {
    if (pending_.empty()) return absl::OkStatus();
    if (insert_ == nullptr) {
      absl::StatusOr<std::unique_ptr<SqliteStatement>> insert = db_.Prepare(
          "INSERT INTO range_folds(events, start_ns, end_ns, horizon_ns, data) "
          "VALUES(?,?,?,?,?)");
      if (!insert.ok()) return insert.status();
      insert_ = *std::move(insert);
    }
    int64_t start_ns = pending_.front().start_ns;
    int64_t end_ns = pending_.front().end_ns;
    for (const FoldedRange& event : pending_) {
      start_ns = std::min(start_ns, event.start_ns);
      end_ns = std::max(end_ns, event.end_ns);
    }
    const std::string data = EncodeRangeFold(pending_);  // bound below: must outlive Run()
    insert_->BindUint(1, pending_.size());
    insert_->BindInt(2, start_ns);
    insert_->BindInt(3, end_ns);
    insert_->BindInt(4, horizon_ns_);
    insert_->BindBlob(5, data);
    events_ += pending_.size();
    pending_.clear();
    return insert_->Run();
  }

  uint64_t events() const { return events_; }
  uint64_t instance_rows() const { return instance_rows_; }

 private:
  SqliteDb& db_;
  const int64_t horizon_ns_;
  std::unique_ptr<SqliteStatement> insert_;
  std::vector<FoldedRange> pending_;
  absl::flat_hash_set<std::pair<int64_t, uint64_t>> attached_;
  uint64_t events_ = 0;
  uint64_t instance_rows_ = 0;
};

}  // namespace

absl::StatusOr<FoldHorizon> StepFolder::Horizon(SqliteDb& db, int64_t keep_raw_steps) {
  // The raw steps, oldest first: the steps before the one at `foldable` are folded.
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(
      "WITH steps AS (SELECT e.start_ns FROM range_events AS e JOIN range_paths AS p "
      "ON p.sid = e.sid AND p.id = e.path_id WHERE p.domain = ?1 AND p.name = ?2) "
      "SELECT (SELECT COUNT(*) FROM steps) - 1 - ?3, start_ns FROM steps ORDER BY start_ns "
      "LIMIT 1 OFFSET MIN(MAX((SELECT COUNT(*) FROM steps) - 1 - ?3, 0), ?4)");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, kFlopscopeDomain);
  (*stmt)->BindText(2, kStepRange);
  (*stmt)->BindInt(3, keep_raw_steps);
  (*stmt)->BindInt(4, kMaxStepsPerFold);
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  FoldHorizon horizon;
  if (*row && (*stmt)->ColumnInt(0) > 0) {
    horizon.start_ns = (*stmt)->ColumnInt(1);
    horizon.more = (*stmt)->ColumnInt(0) > kMaxStepsPerFold;
  }
  (*stmt)->Reset();
  return horizon;
}

absl::StatusOr<FoldOutcome> StepFolder::Fold(SqliteDb& db, const FoldPolicy& policy) {
  FoldOutcome outcome;
  if (policy.keep_raw_steps <= 0) return outcome;
  // IMMEDIATE: the write lock first, then the horizon, so both see the same file.
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::StatusOr<FoldHorizon> horizon = Horizon(db, policy.keep_raw_steps);
  absl::Status status = horizon.status();
  if (status.ok() && horizon->start_ns != 0) {
    outcome.horizon_ns = horizon->start_ns;
    outcome.more = horizon->more;
    status = FoldInTransaction(db, horizon->start_ns, &outcome);
  }
  if (status.ok()) status = db.Exec("COMMIT");
  if (!status.ok()) {
    if (sqlite3_get_autocommit(db.handle()) == 0) db.Exec("ROLLBACK").IgnoreError();
    return status;
  }
  return outcome;
}

absl::Status StepFolder::FoldInTransaction(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome) {
  if (absl::Status s = FoldKernels(db, horizon_ns, outcome); !s.ok()) return s;
  return FoldRanges(db, horizon_ns, outcome);
}

absl::Status StepFolder::FoldKernels(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome) {
  absl::StatusOr<int64_t> last_rowid = LastPrefixRowid(db, kLastKernelRowid, horizon_ns);
  if (!last_rowid.ok()) return last_rowid.status();
  if (*last_rowid <= 0) return absl::OkStatus();
  if (absl::Status s = RunWithValue(db, kFoldKernels, *last_rowid); !s.ok()) return s;
  if (absl::Status s =
          RunWithValue(db, "DELETE FROM kernels WHERE rowid <= ?1 AND counted = 0", *last_rowid);
      !s.ok()) {
    return s;
  }
  outcome->kernels_folded = static_cast<uint64_t>(sqlite3_changes(db.handle()));
  return absl::OkStatus();
}

absl::Status StepFolder::FoldRanges(SqliteDb& db, int64_t horizon_ns, FoldOutcome* outcome) {
  absl::StatusOr<int64_t> last = LastPrefixRowid(db, kLastRangeRowid, horizon_ns);
  if (!last.ok()) return last.status();
  const int64_t last_rowid = *last;
  if (last_rowid <= 0) return absl::OkStatus();

  absl::StatusOr<std::unique_ptr<SqliteStatement>> prefix = db.Prepare(kPrefix);
  if (!prefix.ok()) return prefix.status();
  (*prefix)->BindInt(1, last_rowid);
  FoldSink sink(db, horizon_ns);
  while (true) {
    absl::StatusOr<bool> next = (*prefix)->Step();
    if (!next.ok()) return next.status();
    if (!*next) break;
    if (absl::Status s = sink.Add(ToFolded(**prefix)); !s.ok()) return s;
  }
  if (absl::Status s = sink.Flush(); !s.ok()) return s;
  outcome->range_events_folded = sink.events();
  outcome->instance_rows_folded = sink.instance_rows();
  // The instance_stats rows first: their keys are found through the events still there.
  for (const char* sql : {"DELETE FROM instance_stats WHERE (sid, instance_id) IN "
                          "(SELECT sid, instance_id FROM range_events WHERE rowid <= ?1)",
                          "DELETE FROM range_events WHERE rowid <= ?1"}) {
    if (absl::Status s = RunWithValue(db, sql, last_rowid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
