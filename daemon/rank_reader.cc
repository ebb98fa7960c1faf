#include "daemon/rank_reader.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
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

// Rank files written before kernel tracing lack its tables; they read as empty.
absl::StatusOr<bool> TableExists(SqliteDb& db, const char* name) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt =
      db.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, name);
  absl::StatusOr<bool> row = (*stmt)->Step();
  (*stmt)->Reset();
  return row;
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

absl::Status ReadMemoryStats(SqliteDb& db, RankSnapshot* snapshot) {
  absl::flat_hash_map<std::pair<int64_t, uint64_t>, size_t> rows;
  for (size_t i = 0; i < snapshot->stats.size(); ++i) {
    rows[{snapshot->stats[i].sid, snapshot->stats[i].path_id}] = i;
  }
  return ForEachRow(
      db, "SELECT sid, path_id, kind, count, time_ns, bytes FROM memory_stats",
      [&](SqliteStatement& row) {
        const std::pair<int64_t, uint64_t> key{row.ColumnInt(0), row.ColumnUint(1)};
        auto it = rows.find(key);
        if (it == rows.end()) {  // module_stats always has the row; a hand-edited file may not
          it = rows.emplace(key, snapshot->stats.size()).first;
          snapshot->stats.push_back({key.first, key.second, SelfStats{}});
        }
        SelfStats& stats = snapshot->stats[it->second].stats;
        MemoryTotals& totals =
            row.ColumnInt(2) == v1::ACTIVITY_KIND_MEMSET ? stats.sets : stats.copies;
        totals.count += row.ColumnUint(3);
        totals.time_ns += row.ColumnInt(4);
        totals.bytes += row.ColumnUint(5);
      });
}

// Kernels per occurrence, rolled up through the module range events (SpanRollup). The range
// events are streamed, not held: only occurrences with kernels stay in memory.
absl::Status ReadSpans(SqliteDb& db, RankSnapshot* snapshot) {
  SpanRollup rollup;
  absl::Status status =
      ForEachRow(db,
                 "SELECT sid, instance_id, path_id, kernels, first_start_ns, last_end_ns, busy_ns "
                 "FROM instance_stats",
                 [&](SqliteStatement& row) {
                   rollup.AddOccurrence(
                       row.ColumnInt(0), row.ColumnUint(1),
                       InstanceActivity{row.ColumnUint(2), row.ColumnUint(3), row.ColumnInt(4),
                                        row.ColumnInt(5), row.ColumnInt(6)});
                 });
  if (!status.ok() || rollup.empty()) return status;
  status = ForEachRow(db,
                      "SELECT sid, instance_id, parent_instance_id, path_id FROM range_events "
                      "WHERE kind = 1 ORDER BY rowid",
                      [&](SqliteStatement& row) {
                        rollup.AddRange(row.ColumnInt(0), row.ColumnUint(1), row.ColumnUint(2),
                                        row.ColumnUint(3));
                      });
  if (status.ok()) snapshot->spans = rollup.Finish();
  return status;
}

absl::Status ReadKernelGroups(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT g.sid, g.path_id, g.kind, COALESCE(s.value, ''), g.n, g.total, g.shortest, "
      "g.longest, g.bytes FROM (SELECT sid, path_id, kind, name_id, COUNT(*) AS n, "
      "SUM(end_ns - start_ns) AS total, MIN(end_ns - start_ns) AS shortest, "
      "MAX(end_ns - start_ns) AS longest, SUM(bytes) AS bytes FROM kernels "
      "GROUP BY sid, path_id, kind, name_id) g "
      "LEFT JOIN strings s ON s.sid = g.sid AND s.id = g.name_id",
      [&](SqliteStatement& row) {
        RankSnapshot::KernelGroup& group = snapshot->kernel_groups.emplace_back();
        group.sid = row.ColumnInt(0);
        group.path_id = row.ColumnUint(1);
        const int64_t kind = row.ColumnInt(2);
        group.kind = v1::ActivityKind_IsValid(static_cast<int>(kind))
                         ? static_cast<v1::ActivityKind>(kind)
                         : v1::ACTIVITY_KIND_KERNEL;
        group.name = row.ColumnString(3);
        group.count = row.ColumnUint(4);
        group.total_ns = row.ColumnInt(5);
        group.min_ns = row.ColumnInt(6);
        group.max_ns = row.ColumnInt(7);
        group.bytes = row.ColumnUint(8);
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

absl::StatusOr<RankSnapshot> RankReader::Read(const std::string& path,
                                              const RankReadOptions& options) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  if (!db.ok()) return db.status();
  // One read transaction: every table as of the same commit.
  if (absl::Status s = (*db)->Exec("BEGIN"); !s.ok()) return s;
  RankSnapshot snapshot;
  absl::Status status = ReadPaths(**db, &snapshot);
  if (status.ok()) status = ReadStats(**db, &snapshot);
  absl::StatusOr<bool> has_kernel_tables = TableExists(**db, "instance_stats");
  if (status.ok()) status = has_kernel_tables.status();
  if (status.ok() && *has_kernel_tables) status = ReadMemoryStats(**db, &snapshot);
  if (status.ok() && *has_kernel_tables) status = ReadSpans(**db, &snapshot);
  if (status.ok() && options.kernel_groups) status = ReadKernelGroups(**db, &snapshot);
  if (status.ok()) status = ReadMetadata(**db, &snapshot);
  if (status.ok()) status = ReadLosses(**db, &snapshot);
  (*db)->Exec("COMMIT").IgnoreError();  // read-only: nothing to lose
  if (!status.ok()) return status;
  return snapshot;
}

}  // namespace flopscope::daemon
