#include "daemon/rank_reader.h"

#include <memory>

#include "daemon/sqlite_db.h"

namespace flopscope::daemon {
namespace {

// Runs `sql` and hands every row to `on_row`.
template <typename OnRow>
absl::Status ForEachRow(SqliteDb& db, const char* sql, OnRow on_row) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    on_row(**stmt);
  }
}

absl::Status ReadPaths(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db, "SELECT sid, id, parent_id, domain, name FROM range_paths ORDER BY sid, id",
      [&](SqliteStatement& row) {
        snapshot->paths.push_back({row.ColumnInt(0), row.ColumnUint(1), row.ColumnUint(2),
                                   row.ColumnString(3), row.ColumnString(4)});
      });
}

absl::Status ReadStats(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT sid, path_id, calls, cpu_time_ns, min_ns, max_ns, kernels, gpu_time_ns, flops "
      "FROM module_stats ORDER BY sid, path_id",
      [&](SqliteStatement& row) {
        RankSnapshot::PathStats& entry = snapshot->stats.emplace_back();
        entry.sid = row.ColumnInt(0);
        entry.path_id = row.ColumnUint(1);
        entry.stats.calls = row.ColumnUint(2);
        entry.stats.cpu_time_ns = row.ColumnInt(3);
        entry.stats.min_ns = row.ColumnInt(4);
        entry.stats.max_ns = row.ColumnInt(5);
        entry.stats.kernels = row.ColumnUint(6);
        entry.stats.gpu_time_ns = row.ColumnInt(7);
        entry.stats.has_flops = !row.ColumnIsNull(8);
        entry.stats.flops = row.ColumnDouble(8);
      });
}

absl::Status ReadMetadata(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(db, "SELECT time_ns, key, value FROM metadata ORDER BY sid, rowid",
                    [&](SqliteStatement& row) {
                      v1::Metadata& entry = snapshot->metadata.emplace_back();
                      entry.set_time_ns(row.ColumnInt(0));
                      entry.set_key(row.ColumnString(1));
                      entry.set_value(row.ColumnString(2));
                    });
}

absl::Status ReadLosses(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(db, "SELECT cause, SUM(records) FROM losses GROUP BY cause",
                    [&](SqliteStatement& row) {
                      snapshot->losses[static_cast<int>(row.ColumnInt(0))] = row.ColumnUint(1);
                    });
}

}  // namespace

absl::StatusOr<RankSnapshot> RankReader::Read(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  if (!db.ok()) return db.status();
  // One read transaction: all four tables as of the same commit.
  if (absl::Status s = (*db)->Exec("BEGIN"); !s.ok()) return s;
  RankSnapshot snapshot;
  absl::Status status = ReadPaths(**db, &snapshot);
  if (status.ok()) status = ReadStats(**db, &snapshot);
  if (status.ok()) status = ReadMetadata(**db, &snapshot);
  if (status.ok()) status = ReadLosses(**db, &snapshot);
  (*db)->Exec("COMMIT").IgnoreError();  // read-only: nothing to lose
  if (!status.ok()) return status;
  return snapshot;
}

}  // namespace flopscope::daemon
