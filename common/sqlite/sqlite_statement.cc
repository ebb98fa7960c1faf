#include "common/sqlite/sqlite_statement.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace flopscope {

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

void SqliteStatement::BindText(int index, absl::string_view text) {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    Check(SQLITE_TOOBIG);
    return;
  }
  Check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC));
}

void SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    Check(SQLITE_TOOBIG);
    return;
  }
  // A zero-length blob with a null pointer would bind NULL; the columns are NOT NULL.
  static constexpr char kEmpty = 0;
  Check(sqlite3_bind_blob(stmt_, index, bytes.empty() ? &kEmpty : bytes.data(),
                          static_cast<int>(bytes.size()), SQLITE_STATIC));
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row = Step();
  if (!row.ok()) return row.status();
  if (*row) {
    Reset();
    return absl::InternalError(
        absl::StrCat("statement returned rows where none were expected: ", sqlite3_sql(stmt_)));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (bind_error_ != SQLITE_OK) {
    const int rc = bind_error_;
    Reset();
    return ErrorStatus(rc);
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  // The error text lives on the connection until the next call, so read it before resetting.
  absl::Status status = rc == SQLITE_DONE ? absl::OkStatus() : ErrorStatus(rc);
  Reset();
  if (!status.ok()) return status;
  return false;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
}

absl::string_view SqliteStatement::ColumnText(int index) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  if (text == nullptr) return {};
  return absl::string_view(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}

absl::Status SqliteStatement::ErrorStatus(int rc) const {
  std::string message = absl::StrCat("sqlite: ", sqlite3_errstr(rc));
  if (sqlite3_errcode(db_) == rc) absl::StrAppend(&message, ": ", sqlite3_errmsg(db_));
  // The multi-row kernel INSERT is long: its start names the statement well enough.
  constexpr size_t kMaxSqlInMessage = 160;
  const absl::string_view sql = sqlite3_sql(stmt_);
  absl::StrAppend(&message, " (in: ", sql.substr(0, kMaxSqlInMessage),
                  sql.size() > kMaxSqlInMessage ? "...)" : ")");
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return absl::UnavailableError(message);
  if (primary == SQLITE_FULL) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace flopscope
