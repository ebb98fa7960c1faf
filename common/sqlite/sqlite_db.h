#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sqlite/sqlite_statement.h"

namespace flopscope {

// Highest schema_version of flopscope's own databases this build understands (schema/*.sql): rank
// files are at 5 (2: counter windows, FLOPs by precision; 3: communication kernels a window left
// out; 4: folded old steps; 5: the range instance ids each session stored; older files are
// upgraded by daemon/store/rank_schema.h), the catalog at 2 (2: rank_rejections, added by
// schema/catalog.sql itself on open).
inline constexpr int kSchemaVersion = 5;

// One SQLite connection: the one wrapper of the tree (target flopscope_sqlite), for the daemon's
// own files (OpenWithSchema, OpenExisting) and for files someone else wrote (OpenReadOnly: the
// importer's Nsight Systems exports, whose schema is discovered rather than assumed).
// Not thread-safe: its owner (RankStore, Catalog, RankReader, the importer's reader) serializes
// every use, and statements prepared here must be destroyed before it.
class SqliteDb {
 public:
  // Opens (creating when missing) a database in WAL mode with synchronous=NORMAL, applies
  // `schema_sql` (idempotent CREATE ... IF NOT EXISTS statements) and checks that the file's
  // schema_version is one this daemon can read. Also what bench/ uses to get a database with the
  // daemon's exact schema and settings: OpenWithSchema(path, schema::krankSql).
  static absl::StatusOr<std::unique_ptr<SqliteDb>> OpenWithSchema(const std::string& path,
                                                                  const char* schema_sql);
  // Opens an existing database for queries only (never creates it; see RankReader).
  static absl::StatusOr<std::unique_ptr<SqliteDb>> OpenExisting(const std::string& path);
  // Opens a file someone else wrote, read-only: nothing is ever written to it and no schema is
  // assumed. Fails (InvalidArgument) when the file is not an SQLite database.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> OpenReadOnly(const std::string& path);

  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs constant SQL text (schema, pragmas). Never pass text built from input: values go
  // through Prepare() and Bind*().
  absl::Status Exec(const char* sql);
  absl::StatusOr<std::unique_ptr<SqliteStatement>> Prepare(absl::string_view sql);

  // Where a prepared statement goes and its SQL: owners prepare all of theirs in one call.
  struct StatementSlot {
    std::unique_ptr<SqliteStatement>* slot;
    const char* sql;
  };
  // Prepares every statement into its slot; stops at the first failure and returns it.
  absl::Status PrepareAll(std::initializer_list<StatementSlot> statements);

  // Runs a one-off query and calls `on_row` for every row; stops at the first error `on_row`
  // returns, and returns it.
  absl::Status ForEachRow(absl::string_view sql,
                          const std::function<absl::Status(const SqliteStatement&)>& on_row);
  // Names of the tables and views in the file.
  absl::StatusOr<absl::flat_hash_set<std::string>> TableNames();
  // Column names of `table` (empty when it does not exist). `table` must be a name read from
  // the file itself (TableNames), never input: it is quoted, not bound.
  absl::StatusOr<absl::flat_hash_set<std::string>> ColumnNames(absl::string_view table);

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, int flags);
  // 0 when the file has no schema_version table yet (a new file).
  absl::StatusOr<int64_t> SchemaVersion();
  absl::Status CheckSchemaVersion(bool must_exist);

  sqlite3* db_;
  std::string path_;
};

}  // namespace flopscope
