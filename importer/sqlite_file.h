#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::importer {

// One row of a query, with NULL-aware typed access by column index.
class SqliteRow {
 public:
  explicit SqliteRow(sqlite3_stmt* statement) : statement_(statement) {}
  bool IsNull(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  std::optional<int64_t> Int(int column) const;
  std::optional<double> Double(int column) const;
  // Empty for NULL; the view lives until the next row.
  absl::string_view Text(int column) const;

 private:
  sqlite3_stmt* statement_;
};

// A read-only view of an SQLite file someone else wrote (an Nsight Systems export): nothing is
// ever written to it, and its schema is discovered rather than assumed, since exports of
// different Nsight versions differ.
class SqliteFile {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteFile>> Open(const std::string& path);
  ~SqliteFile();
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;

  bool HasTable(absl::string_view table) const { return tables_.contains(table); }
  // Column names of `table` (empty when it does not exist).
  absl::StatusOr<absl::flat_hash_set<std::string>> Columns(absl::string_view table);
  // Runs `sql` and calls `on_row` for every row; stops at the first error `on_row` returns.
  absl::Status ForEachRow(const std::string& sql,
                          const std::function<absl::Status(const SqliteRow&)>& on_row);

 private:
  explicit SqliteFile(sqlite3* db) : db_(db) {}
  absl::Status LoadTableNames();
  absl::Status Error(absl::string_view doing) const;

  sqlite3* db_;
  absl::flat_hash_set<std::string> tables_;
};

}  // namespace flopscope::importer
