#include "importer/sqlite_file.h"

#include "absl/strings/str_cat.h"

namespace flopscope::importer {

std::optional<int64_t> SqliteRow::Int(int column) const {
  if (IsNull(column)) return std::nullopt;
  return sqlite3_column_int64(statement_, column);
}

std::optional<double> SqliteRow::Double(int column) const {
  if (IsNull(column)) return std::nullopt;
  return sqlite3_column_double(statement_, column);
}

absl::string_view SqliteRow::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return {};
  return absl::string_view(reinterpret_cast<const char*>(text),
                           static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

absl::StatusOr<std::unique_ptr<SqliteFile>> SqliteFile::Open(const std::string& path) {
  sqlite3* db = nullptr;
  // Read-only and no mutex: the file belongs to someone else and one thread reads it.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::InvalidArgumentError(absl::StrCat("cannot open as SQLite: ", message));
  }
  std::unique_ptr<SqliteFile> file(new SqliteFile(db));
  if (absl::Status s = file->LoadTableNames(); !s.ok()) return s;
  return file;
}

SqliteFile::~SqliteFile() { sqlite3_close(db_); }

absl::Status SqliteFile::LoadTableNames() {
  return ForEachRow("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')",
                    [this](const SqliteRow& row) {
                      tables_.insert(std::string(row.Text(0)));
                      return absl::OkStatus();
                    });
}

absl::StatusOr<absl::flat_hash_set<std::string>> SqliteFile::Columns(absl::string_view table) {
  absl::flat_hash_set<std::string> columns;
  if (!HasTable(table)) return columns;
  // Table names come from sqlite_master (checked above), never from the user.
  absl::Status status = ForEachRow(absl::StrCat("PRAGMA table_info(\"", table, "\")"),
                                   [&columns](const SqliteRow& row) {
                                     columns.insert(std::string(row.Text(1)));
                                     return absl::OkStatus();
                                   });
  if (!status.ok()) return status;
  return columns;
}

absl::Status SqliteFile::ForEachRow(const std::string& sql,
                                    const std::function<absl::Status(const SqliteRow&)>& on_row) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    return Error(sql);
  }
  absl::Status status = absl::OkStatus();
  int rc = SQLITE_ROW;
  const SqliteRow row(statement);
  while (status.ok() && (rc = sqlite3_step(statement)) == SQLITE_ROW) status = on_row(row);
  if (status.ok() && rc != SQLITE_DONE) status = Error(sql);
  sqlite3_finalize(statement);
  return status;
}

absl::Status SqliteFile::Error(absl::string_view doing) const {
  return absl::InvalidArgumentError(
      absl::StrCat("SQLite error \"", sqlite3_errmsg(db_), "\" while running: ", doing));
}

}  // namespace flopscope::importer
