#pragma once

// One number from a SQL query on a rank file, read on a connection of its own (as another
// reader would see the file), for store tests.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/sqlite/sqlite_db.h"

namespace flopscope::daemon::fixtures {

// The first column of the first row as a double (exact for integers below 2^53); -1 with a test
// failure when the file, the statement or the row is missing.
inline double QueryNumber(const std::string& path, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return -1;
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = (*db)->Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok()) return -1;
  absl::StatusOr<bool> row = (*stmt)->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  if (!row.ok() || !*row) return -1;
  const double value = (*stmt)->ColumnDouble(0);
  (*stmt)->Reset();
  return value;
}

}  // namespace flopscope::daemon::fixtures
