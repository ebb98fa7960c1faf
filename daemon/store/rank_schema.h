#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"

namespace flopscope::daemon {

// Brings a rank file up to the schema of this daemon (schema/rank.sql, kSchemaVersion), in place.
//
// Version 1 files (written before counter windows) lack columns that CREATE TABLE IF NOT EXISTS
// cannot add. The upgrade runs in ONE write transaction: it applies rank.sql (new tables), adds
// each missing column with ALTER TABLE ... ADD COLUMN (only when PRAGMA table_info lacks it, so an
// upgrade interrupted before its commit simply runs again), fills the new rollups from the counted
// FLOPs the file already holds (version 1 stored them for imports only: their module comes from
// the matching `kernels` row, their split by precision from kernel_flops' columns, their steps
// from counted_step), and moves schema_version to kSchemaVersion. Version 2 files only lack
// counter_windows.comm_kernels_excluded (3), added the same way; version 3 files only lack
// the fold tables (4) and version 4 files range_instance_ids (5), which applying rank.sql creates. A file at the current version is
// only read (one query). Both writers (RankStore) and readers (RankReader: the files of finished
// jobs are opened by reports only) call it right after opening, so every query can rely on the
// current columns.
class RankSchema {
 public:
  static absl::Status Upgrade(SqliteDb& db);

  // schema_version of an open rank file (0 when it has none).
  static absl::StatusOr<int64_t> Version(SqliteDb& db);

 private:
  static absl::Status UpgradeInTransaction(SqliteDb& db);
  static absl::StatusOr<bool> HasColumn(SqliteDb& db, const char* table, const char* column);
  static absl::Status AddMissingColumns(SqliteDb& db);
  static absl::Status FillFromVersion1(SqliteDb& db);
};

}  // namespace flopscope::daemon
