// Damaged database files found at start: moved aside by name, sound ones left as they are.

#include "daemon/store/damaged_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/catalog/catalog.h"
#include "daemon/catalog/catalog_rebuild.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// A real rank file of `job`/`rank`, closed again.
void MakeRankFile(const std::string& data_dir, const std::string& job, int32_t rank) {
  ASSERT_TRUE(EnsureDirectory(JobDirectory(data_dir, job)).ok());
  ASSERT_TRUE(RankStore::Open(RankFilePath(data_dir, job, rank)).ok());
}

// Overwrites `bytes` bytes at `offset` with a pattern no SQLite page or header has.
void Scribble(const std::string& path, std::streamoff offset, size_t bytes) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(offset);
  const std::string junk(bytes, '\xA5');
  file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

TEST(DamagedFilesTest, ADamagedRankFileIsMovedAsideAndSoundOnesStay) {
  fixtures::ScopedTempDir dir;
  ASSERT_TRUE(Catalog::Open(CatalogPath(dir.path())).ok());
  MakeRankFile(dir.path(), "a", 0);
  MakeRankFile(dir.path(), "a", 1);
  const std::string bad = RankFilePath(dir.path(), "a", 1);
  Scribble(bad, 0, 100);  // the header: "file is not a database"

  const std::vector<DamagedFile> damaged = QuarantineDamagedFiles(dir.path());
  ASSERT_EQ(damaged.size(), 1u);
  EXPECT_EQ(damaged[0].path, bad);
  EXPECT_EQ(damaged[0].moved_to, bad + ".damaged");
  EXPECT_THAT(damaged[0].problem, HasSubstr("not a database"));
  EXPECT_FALSE(std::filesystem::exists(bad));
  EXPECT_TRUE(std::filesystem::exists(bad + ".damaged"));
  EXPECT_EQ(DamagedCopyOf(bad), bad + ".damaged");
  EXPECT_EQ(DamagedCopyOf(RankFilePath(dir.path(), "a", 0)), "");

  // The rank starts over in a fresh file; a second damage keeps the first copy.
  MakeRankFile(dir.path(), "a", 1);
  Scribble(bad, 0, 100);
  ASSERT_EQ(QuarantineDamagedFiles(dir.path()).size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(bad + ".damaged"));
  EXPECT_EQ(DamagedCopyOf(bad), bad + ".damaged.1");
  EXPECT_TRUE(QuarantineDamagedFiles(dir.path()).empty());  // nothing left to find
}

TEST(DamagedFilesTest, DamagedPagesFailQuickCheckAndADamagedCatalogGoesToo) {
  fixtures::ScopedTempDir dir;
  ASSERT_TRUE(Catalog::Open(CatalogPath(dir.path())).ok());
  // Pages past the first scribbled over: the header still says SQLite, the b-trees do not.
  const std::string catalog = CatalogPath(dir.path());
  const auto size = static_cast<std::streamoff>(std::filesystem::file_size(catalog));
  ASSERT_GT(size, 4096);
  Scribble(catalog, 4096, static_cast<size_t>(size - 4096));

  const std::vector<DamagedFile> damaged = QuarantineDamagedFiles(dir.path());
  ASSERT_EQ(damaged.size(), 1u);
  EXPECT_EQ(damaged[0].path, catalog);
  EXPECT_FALSE(damaged[0].problem.empty());
  EXPECT_FALSE(std::filesystem::exists(catalog));
  EXPECT_TRUE(Catalog::Open(catalog).ok());  // a fresh catalog opens in its place
}

// A file that cannot be checked now (locked by another connection here; a full disk or an I/O
// error alike) is not damaged: it stays where it is. Reliability campaign rerun, row 5: a daemon
// started on a full disk moved its sound catalog aside ("disk I/O error").
TEST(DamagedFilesTest, AFileThatCannotBeCheckedNowStays) {
  fixtures::ScopedTempDir dir;
  MakeRankFile(dir.path(), "a", 0);
  const std::string rank = RankFilePath(dir.path(), "a", 0);
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(rank.c_str(), &holder), SQLITE_OK);
  // An exclusive lock held open: every other connection gets SQLITE_BUSY.
  ASSERT_EQ(sqlite3_exec(holder,
                         "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; "
                         "UPDATE schema_version SET version = version;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(holder);
  EXPECT_TRUE(QuarantineDamagedFiles(dir.path()).empty());
  EXPECT_TRUE(std::filesystem::exists(rank));
  EXPECT_FALSE(std::filesystem::exists(rank + ".damaged"));
  sqlite3_close(holder);
}

TEST(DamagedFilesTest, WhatIsNotARegularFileIsLeftAlone) {
  fixtures::ScopedTempDir dir;
  const std::string rank = RankFilePath(dir.path(), "a", 0);
  ASSERT_TRUE(std::filesystem::create_directories(rank));
  EXPECT_TRUE(QuarantineDamagedFiles(dir.path()).empty());
  EXPECT_TRUE(std::filesystem::is_directory(rank));
}

TEST(DamagedFilesTest, ANewCatalogListsTheRankFilesAlreadyThere) {
  fixtures::ScopedTempDir dir;
  ASSERT_TRUE(EnsureDirectory(JobDirectory(dir.path(), "a")).ok());
  {
    absl::StatusOr<std::unique_ptr<RankStore>> store =
        RankStore::Open(RankFilePath(dir.path(), "a", 3));
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<SessionHandle> session = (*store)->OpenSession(fixtures::Hello("a", 3, "s-a3"));
    ASSERT_TRUE(session.ok()) << session.status();
    v1::Batch batch;
    batch.set_seq(1);
    fixtures::AddPath(batch, 1, 0, "model");
    for (int i = 0; i < 5; ++i) fixtures::AddRange(batch, 1, i * 100, 50);
    ASSERT_TRUE((*store)->Commit(session->sid, batch).ok());
  }
  // The catalog was lost (moved aside as damaged): a new one starts empty.
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(CatalogPath(dir.path()));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(RelistRankFiles(dir.path(), catalog->get()), 1u);
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = (*catalog)->ListRanks("a");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0].rank(), 3);
  EXPECT_EQ((*ranks)[0].session_id(), "s-a3");
  EXPECT_EQ((*ranks)[0].range_events(), 5u);
  EXPECT_FALSE((*ranks)[0].connected());
}

}  // namespace
}  // namespace flopscope::daemon
