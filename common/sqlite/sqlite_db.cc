#include "common/sqlite/sqlite_db.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flopscope {
namespace {

// How long a connection waits for another connection's write lock (a query reading while the
// ingest path checkpoints) before giving up with SQLITE_BUSY.
constexpr int kBusyTimeoutMs = 5000;

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = absl::StrCat("cannot open ", path, ": ",
                                       raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
    sqlite3_close_v2(raw);
    return rc == SQLITE_CANTOPEN ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return std::unique_ptr<SqliteDb>(new SqliteDb(raw, path));
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::OpenWithSchema(const std::string& path,
                                                                   const char* schema_sql) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db.ok()) return db.status();
  // WAL: readers (queries) never block the writer; NORMAL: a commit is durable against a crash
  // of the daemon, and against power loss up to the last checkpoint (DESIGN: Storage).
  // Checked before the schema is applied, so that a newer daemon's file is never touched.
  if (absl::Status s = (*db)->CheckSchemaVersion(/*must_exist=*/false); !s.ok()) return s;
  if (absl::Status s = (*db)->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok())
    return s;
  if (absl::Status s = (*db)->Exec(schema_sql); !s.ok()) return s;
  return db;
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::OpenReadOnly(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = Open(path, SQLITE_OPEN_READONLY);
  if (!db.ok()) return absl::InvalidArgumentError(db.status().message());
  // SQLite reads the header lazily: touch the schema now, so a file that is not a database fails
  // here rather than at the first query.
  if (absl::StatusOr<absl::flat_hash_set<std::string>> tables = (*db)->TableNames(); !tables.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, " as SQLite: ", tables.status().message()));
  }
  return db;
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::OpenExisting(const std::string& path) {
  // Read-write without CREATE: a missing file is an error, and a reader may still need to
  // create the WAL index (-shm) when the daemon has no connection open on the file.
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = Open(path, SQLITE_OPEN_READWRITE);
  if (!db.ok()) return db.status();
  if (absl::Status s = (*db)->CheckSchemaVersion(/*must_exist=*/true); !s.ok()) return s;
  return db;
}

SqliteDb::~SqliteDb() {
  // Closing the last connection checkpoints the WAL into the main file and removes it.
  sqlite3_close_v2(db_);
}

absl::Status SqliteDb::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) == SQLITE_OK) return absl::OkStatus();
  absl::Status status = absl::InternalError(
      absl::StrCat("sqlite: ", path_, ": ", error != nullptr ? error : sqlite3_errmsg(db_)));
  sqlite3_free(error);
  return status;
}

absl::StatusOr<std::unique_ptr<SqliteStatement>> SqliteDb::Prepare(absl::string_view sql) {
  if (sql.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("SQL text too long");
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("sqlite: cannot prepare \"", sql, "\": ", sqlite3_errmsg(db_)));
  }
  return std::make_unique<SqliteStatement>(db_, stmt);
}

absl::StatusOr<int64_t> SqliteDb::SchemaVersion() {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> has_table = Prepare(
      "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!has_table.ok()) return has_table.status();
  absl::StatusOr<bool> row = (*has_table)->Step();
  if (!row.ok()) return row.status();  // e.g. "file is not a database"
  const bool exists = *row && (*has_table)->ColumnInt(0) > 0;
  (*has_table)->Reset();
  if (!exists) return 0;
  absl::StatusOr<std::unique_ptr<SqliteStatement>> version =
      Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!version.ok()) return version.status();
  row = (*version)->Step();
  if (!row.ok()) return row.status();
  const int64_t value = *row ? (*version)->ColumnInt(0) : 0;
  (*version)->Reset();
  return value;
}

absl::Status SqliteDb::CheckSchemaVersion(bool must_exist) {
  absl::StatusOr<int64_t> version = SchemaVersion();
  if (!version.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " is not a readable flopscope database: ", version.status().message()));
  }
  if (*version == 0 && must_exist) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " is not a flopscope database"));
  }
  if (*version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " has schema version ", *version,
                                                      "; this flopscoped reads up to ",
                                                      kSchemaVersion, " (upgrade flopscoped)"));
  }
  return absl::OkStatus();
}

absl::Status SqliteDb::PrepareAll(std::initializer_list<StatementSlot> statements) {
  for (const StatementSlot& statement : statements) {
    absl::StatusOr<std::unique_ptr<SqliteStatement>> prepared = Prepare(statement.sql);
    if (!prepared.ok()) return prepared.status();
    *statement.slot = *std::move(prepared);
  }
  return absl::OkStatus();
}

absl::Status SqliteDb::ForEachRow(
    absl::string_view sql, const std::function<absl::Status(const SqliteStatement&)>& on_row) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> statement = Prepare(sql);
  if (!statement.ok()) return statement.status();
  for (;;) {
    absl::StatusOr<bool> row = (*statement)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    if (absl::Status status = on_row(**statement); !status.ok()) {
      (*statement)->Reset();
      return status;
    }
  }
}

absl::StatusOr<absl::flat_hash_set<std::string>> SqliteDb::TableNames() {
  absl::flat_hash_set<std::string> names;
  absl::Status status = ForEachRow("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')",
                                   [&names](const SqliteStatement& row) {
                                     names.insert(row.ColumnString(0));
                                     return absl::OkStatus();
                                   });
  if (!status.ok()) return status;
  return names;
}

absl::StatusOr<absl::flat_hash_set<std::string>> SqliteDb::ColumnNames(absl::string_view table) {
  absl::flat_hash_set<std::string> columns;
  absl::Status status = ForEachRow(absl::StrCat("PRAGMA table_info(\"", table, "\")"),
                                   [&columns](const SqliteStatement& row) {
                                     columns.insert(row.ColumnString(1));
                                     return absl::OkStatus();
                                   });
  if (!status.ok()) return status;
  return columns;
}

}  // namespace flopscope
