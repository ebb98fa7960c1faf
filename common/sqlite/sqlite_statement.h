#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope {

// A prepared statement, prepared once and reused: bind, Run() or Step() until done, and the
// statement resets itself for the next use. Binding never fails loudly: the first bind error is
// kept and returned by the next Run()/Step(), so hot loops bind without a branch per column.
//
// Not thread-safe: a statement belongs to the connection that prepared it, and that connection's
// owner serializes access (the daemon's RankStore and Catalog hold their own mutex around every
// use; the importer reads from one thread).
class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Parameter indexes are 1-based, as in SQLite. Text and blobs are NOT copied: the bytes must
  // stay alive until the statement has run (they are protobuf fields of the batch being stored).
  void BindInt(int index, int64_t value) { Check(sqlite3_bind_int64(stmt_, index, value)); }
  // uint64 protobuf fields are stored bit-for-bit (see schema/rank.sql).
  void BindUint(int index, uint64_t value) { BindInt(index, static_cast<int64_t>(value)); }
  void BindDouble(int index, double value) { Check(sqlite3_bind_double(stmt_, index, value)); }
  void BindNull(int index) { Check(sqlite3_bind_null(stmt_, index)); }
  void BindText(int index, absl::string_view text);
  void BindBlob(int index, absl::string_view bytes);

  // Runs a statement that returns no rows (INSERT, UPDATE, ...), then resets it.
  absl::Status Run();
  // Advances to the next row: true while there is one. After false (or an error) the statement
  // is reset and its bindings cleared.
  absl::StatusOr<bool> Step();
  // Drops a half-read result set and the bindings.
  void Reset();

  int64_t ColumnInt(int index) const { return sqlite3_column_int64(stmt_, index); }
  uint64_t ColumnUint(int index) const { return static_cast<uint64_t>(ColumnInt(index)); }
  double ColumnDouble(int index) const { return sqlite3_column_double(stmt_, index); }
  bool ColumnIsNull(int index) const { return sqlite3_column_type(stmt_, index) == SQLITE_NULL; }
  // NULL-aware reads, for files someone else wrote (their columns may hold NULL anywhere).
  std::optional<int64_t> ColumnOptionalInt(int index) const {
    if (ColumnIsNull(index)) return std::nullopt;
    return ColumnInt(index);
  }
  std::optional<double> ColumnOptionalDouble(int index) const {
    if (ColumnIsNull(index)) return std::nullopt;
    return ColumnDouble(index);
  }
  // Valid until the next Step()/Reset(); empty for NULL.
  absl::string_view ColumnText(int index) const;
  std::string ColumnString(int index) const { return std::string(ColumnText(index)); }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
  }
  absl::Status ErrorStatus(int rc) const;

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_error_ = SQLITE_OK;
};

}  // namespace flopscope
