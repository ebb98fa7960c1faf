#include "common/sqlite/sqlite_db.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace flopscope {
namespace {

class SqliteDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "sqlite_db_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A small file as someone else would write it: one table, a NULL in each column.
  std::string WriteFile() {
    const std::string path = (dir_ / "other.sqlite").string();
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        SqliteDb::OpenWithSchema(path, "CREATE TABLE IF NOT EXISTS t(a INTEGER, b TEXT);");
    EXPECT_TRUE(db.ok()) << db.status();
    EXPECT_TRUE((*db)->Exec("INSERT INTO t VALUES (7, 'seven'), (NULL, NULL), (9, 'nine');").ok());
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(SqliteDbTest, ReadOnlyFilesAreDiscoveredAndRead) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(WriteFile());
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<absl::flat_hash_set<std::string>> tables = (*db)->TableNames();
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE(tables->contains("t"));
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = (*db)->ColumnNames("t");
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_EQ(*columns, (absl::flat_hash_set<std::string>{"a", "b"}));
  EXPECT_TRUE((*db)->ColumnNames("missing")->empty());

  std::vector<std::optional<int64_t>> numbers;
  std::vector<std::string> texts;
  ASSERT_TRUE((*db)
                  ->ForEachRow("SELECT a, b FROM t ORDER BY rowid",
                               [&](const SqliteStatement& row) {
                                 numbers.push_back(row.ColumnOptionalInt(0));
                                 texts.push_back(row.ColumnString(1));
                                 return absl::OkStatus();
                               })
                  .ok());
  EXPECT_EQ(numbers, (std::vector<std::optional<int64_t>>{7, std::nullopt, 9}));
  EXPECT_EQ(texts, (std::vector<std::string>{"seven", "", "nine"}));
  // Nothing is ever written to someone else's file.
  EXPECT_FALSE((*db)->Exec("INSERT INTO t VALUES (1, 'one');").ok());
}

TEST_F(SqliteDbTest, ForEachRowStopsAtTheFirstErrorOfTheCallback) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(WriteFile());
  ASSERT_TRUE(db.ok()) << db.status();
  int calls = 0;
  const absl::Status status =
      (*db)->ForEachRow("SELECT a FROM t", [&calls](const SqliteStatement&) {
        ++calls;
        return absl::InvalidArgumentError("bad row");
      });
  EXPECT_EQ(status, absl::InvalidArgumentError("bad row"));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE((*db)
                   ->ForEachRow("SELECT nope FROM t",
                                [](const SqliteStatement&) { return absl::OkStatus(); })
                   .ok());
}

TEST_F(SqliteDbTest, AFileThatIsNotADatabaseIsRefusedAtOpen) {
  const std::string path = (dir_ / "text.sqlite").string();
  std::ofstream(path) << "this is not SQLite, only text long enough to fill a header page";
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(path);
  EXPECT_TRUE(absl::IsInvalidArgument(db.status())) << db.status();
  EXPECT_TRUE(absl::IsInvalidArgument(SqliteDb::OpenReadOnly((dir_ / "none").string()).status()));
}

TEST_F(SqliteDbTest, PrepareAllFillsEverySlotOrReturnsTheFirstFailure) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenWithSchema(
      (dir_ / "own.sqlite").string(), "CREATE TABLE IF NOT EXISTS t(a INTEGER);");
  ASSERT_TRUE(db.ok()) << db.status();
  std::unique_ptr<SqliteStatement> insert, select, broken;
  ASSERT_TRUE(
      (*db)
          ->PrepareAll({{&insert, "INSERT INTO t VALUES (?)"}, {&select, "SELECT COUNT(*) FROM t"}})
          .ok());
  insert->BindInt(1, 5);
  ASSERT_TRUE(insert->Run().ok());
  ASSERT_TRUE(*select->Step());
  EXPECT_EQ(select->ColumnInt(0), 1);
  select->Reset();
  EXPECT_FALSE((*db)->PrepareAll({{&broken, "SELECT * FROM nowhere"}}).ok());
  EXPECT_EQ(broken, nullptr);
}

}  // namespace
}  // namespace flopscope
