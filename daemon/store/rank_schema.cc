#include "daemon/store/rank_schema.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "schema/schema_sql.h"

namespace flopscope::daemon {
namespace {

// Columns that versions 2 and 3 added to tables older versions had, with their definitions as
// schema/rank.sql spells them (ADD COLUMN needs the DEFAULT of a NOT NULL column).
struct AddedColumn {
  const char* table;
  const char* column;
  const char* definition;
};
constexpr AddedColumn kAddedColumns[] = {
    {"range_events", "counted", "INTEGER NOT NULL DEFAULT 0"},
    {"kernels", "counted", "INTEGER NOT NULL DEFAULT 0"},
    {"kernel_flops", "path_id", "INTEGER NOT NULL DEFAULT 0"},
    {"kernel_flops", "range_instance_id", "INTEGER NOT NULL DEFAULT 0"},
    {"kernel_flops", "name_id", "INTEGER NOT NULL DEFAULT 0"},
    {"kernel_flops", "device_id", "INTEGER NOT NULL DEFAULT 0"},
    {"kernel_flops", "phase_path_id", "INTEGER NOT NULL DEFAULT 0"},
    {"module_stats", "counted_kernels", "INTEGER NOT NULL DEFAULT 0"},
    // Version 3.
    {"counter_windows", "comm_kernels_excluded", "INTEGER NOT NULL DEFAULT 0"},
};

// Version 1 kept counted FLOPs (imports only) in kernel_flops rows keyed by correlation id and
// in module_stats.flops; version 2 also keeps them by module, precision and step. Rebuilt here
// once, in the upgrade's transaction. The attribution join may find several kernels with the
// same correlation id (0: launch not seen); those rows are unattributed in practice either way.
constexpr const char* kFillFromVersion1[] = {
    "UPDATE kernel_flops SET path_id = k.path_id, range_instance_id = k.range_instance_id, "
    "name_id = k.name_id, device_id = k.device_id FROM kernels AS k "
    "WHERE k.sid = kernel_flops.sid AND k.correlation_id = kernel_flops.correlation_id",

    "INSERT OR IGNORE INTO module_flops(sid, path_id, precision, flops, kernels) "
    "SELECT sid, path_id, precision, SUM(flops), COUNT(*) FROM ("
    "SELECT sid, path_id, 'fp64' AS precision, fp64 AS flops FROM kernel_flops WHERE fp64 > 0 "
    "UNION ALL SELECT sid, path_id, 'fp32', fp32 FROM kernel_flops WHERE fp32 > 0 "
    "UNION ALL SELECT sid, path_id, 'fp16', fp16 FROM kernel_flops WHERE fp16 > 0 "
    "UNION ALL SELECT f.sid, f.path_id, 'tensor:' || t.key, t.value "
    "FROM kernel_flops AS f, json_each(f.tensor) AS t WHERE t.value > 0"
    ") GROUP BY sid, path_id, precision",

    "UPDATE module_stats SET counted_kernels = c.n FROM "
    "(SELECT sid, path_id, COUNT(*) AS n FROM kernel_flops GROUP BY sid, path_id) AS c "
    "WHERE c.sid = module_stats.sid AND c.path_id = module_stats.path_id",

    "INSERT OR IGNORE INTO counted_steps(sid, step) "
    "SELECT DISTINCT sid, counted_step FROM kernel_flops WHERE counted_step >= 0",
};

}  // namespace

absl::StatusOr<int64_t> RankSchema::Version(SqliteDb& db) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt =
      db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  const int64_t version = *row ? (*stmt)->ColumnInt(0) : 0;
  (*stmt)->Reset();
  return version;
}

absl::Status RankSchema::Upgrade(SqliteDb& db) {
  absl::StatusOr<int64_t> version = Version(db);
  if (!version.ok()) return version.status();
  if (*version >= kSchemaVersion) return absl::OkStatus();
  // IMMEDIATE: the write lock first, so that two connections upgrading the same file (a report
  // and a reconnecting stream) take turns instead of failing half-way.
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status status = UpgradeInTransaction(db);
  if (status.ok()) status = db.Exec("COMMIT");
  if (!status.ok()) {
    if (sqlite3_get_autocommit(db.handle()) == 0) db.Exec("ROLLBACK").IgnoreError();
    return absl::Status(status.code(), absl::StrCat("cannot upgrade ", db.path(), " to schema ",
                                                    kSchemaVersion, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status RankSchema::UpgradeInTransaction(SqliteDb& db) {
  // Read again under the lock: another connection may have upgraded the file meanwhile.
  absl::StatusOr<int64_t> version = Version(db);
  if (!version.ok()) return version.status();
  if (*version >= kSchemaVersion) return absl::OkStatus();
  if (absl::Status s = db.Exec(schema::krankSql); !s.ok()) return s;
  if (absl::Status s = AddMissingColumns(db); !s.ok()) return s;
  // Only version 1 files lack the rollups (a version 2 file has them complete already).
  if (*version < 2) {
    if (absl::Status s = FillFromVersion1(db); !s.ok()) return s;
  }
  absl::StatusOr<std::unique_ptr<SqliteStatement>> bump =
      db.Prepare("UPDATE schema_version SET version = ?");
  if (!bump.ok()) return bump.status();
  (*bump)->BindInt(1, kSchemaVersion);
  return (*bump)->Run();
}

absl::StatusOr<bool> RankSchema::HasColumn(SqliteDb& db, const char* table, const char* column) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt =
      db.Prepare("SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, table);
  (*stmt)->BindText(2, column);
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  const bool present = *row && (*stmt)->ColumnInt(0) > 0;
  (*stmt)->Reset();
  return present;
}

absl::Status RankSchema::AddMissingColumns(SqliteDb& db) {
  for (const AddedColumn& added : kAddedColumns) {
    absl::StatusOr<bool> present = HasColumn(db, added.table, added.column);
    if (!present.ok()) return present.status();
    if (*present) continue;
    // Built from the constants above only: no input reaches this SQL text.
    const std::string sql = absl::StrCat("ALTER TABLE ", added.table, " ADD COLUMN ", added.column,
                                         " ", added.definition);
    if (absl::Status s = db.Exec(sql.c_str()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RankSchema::FillFromVersion1(SqliteDb& db) {
  for (const char* sql : kFillFromVersion1) {
    if (absl::Status s = db.Exec(sql); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
