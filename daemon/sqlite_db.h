#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/sqlite_statement.h"

namespace flopscope::daemon {

// Highest schema_version this daemon understands (schema/*.sql): rank files are at 2 (counter
// windows, FLOPs by precision; version 1 files are upgraded by daemon/rank_schema.h), the catalog
// is still at 1.
inline constexpr int kSchemaVersion = 2;

// One SQLite connection. Not thread-safe: its owner (RankStore, Catalog, RankReader) serializes
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

}  // namespace flopscope::daemon
