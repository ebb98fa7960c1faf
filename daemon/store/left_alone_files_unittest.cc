// Rank files the daemon leaves alone (a directory, a symlink, a newer daemon's file): a new
// session of the rank is stored beside them, reported, and the entry itself is never touched.
// Reliability campaign rerun, row 6: each of these refused its rank's every new session.

#include "daemon/store/left_alone_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "daemon/catalog/catalog.h"
#include "daemon/catalog/catalog_rebuild.h"
#include "daemon/query/query_service.h"
#include "daemon/store/damaged_files.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/rank_store.h"
#include "daemon/store/store_registry.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "left-alone";

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class LeftAloneFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(CatalogPath(dir_.path()));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    ASSERT_TRUE(EnsureDirectory(JobDirectory(dir_.path(), kJob)).ok());
  }

  std::string Usual(int32_t rank) const { return RankFilePath(dir_.path(), kJob, rank); }
  std::string Beside(int32_t rank) const { return AlternateRankFilePath(dir_.path(), kJob, rank); }

  // One session of `rank` through the registry, as a stream stores it: `ranges` ranges of the
  // module "model", the catalog told of it. The registry is the daemon's (one per start).
  void StoreSession(int32_t rank, const std::string& session_id, int ranges) {
    StoreRegistry stores(dir_.path());
    absl::StatusOr<std::shared_ptr<RankStore>> store = stores.Acquire(kJob, rank);
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::SessionHello hello = fixtures::Hello(kJob, rank, session_id);
    absl::StatusOr<SessionHandle> session = (*store)->OpenSession(hello);
    ASSERT_TRUE(session.ok()) << session.status();
    v1::Batch batch;
    batch.set_seq(1);
    fixtures::AddPath(batch, 1, 0, "model");
    for (int i = 0; i < ranges; ++i) fixtures::AddRange(batch, 1, i * 100, 50);
    absl::Status committed = (*store)->Commit(session->sid, batch);
    ASSERT_TRUE(committed.ok()) << committed;
    ASSERT_TRUE(catalog_->SessionConnected(hello, fixtures::BaseNs()).ok());
    ASSERT_TRUE(catalog_->UpdateTotals(kJob, rank, (*store)->Totals(), fixtures::BaseNs()).ok());
  }

  absl::StatusOr<v1::Report> Report() {
    QueryService service(dir_.path(), catalog_.get());
    v1::ReportRequest request;
    request.set_job_id(kJob);
    return service.BuildReport(request);
  }

  // Rank 0 in its usual file; `leave_alone` puts something at rank 1's; a new session of rank 1
  // with 7 ranges must then be stored beside it, counted and reported, and rank 1's entry named.
  void ExpectStoredBeside(const std::function<void()>& leave_alone, const std::string& why) {
    StoreSession(0, "s-0", 3);
    leave_alone();
    EXPECT_THAT(WhyLeftAlone(Usual(1)), HasSubstr(why));
    StoreSession(1, "s-1", 7);
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(Beside(1))));

    absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(kJob);
    ASSERT_TRUE(ranks.ok()) << ranks.status();
    ASSERT_EQ(ranks->size(), 2u);
    EXPECT_EQ((*ranks)[1].range_events(), 7u);

    absl::StatusOr<v1::Report> report = Report();
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->ranks_size(), 2);
    EXPECT_EQ(report->unreadable_ranks_size(), 0);
    uint64_t calls = 0;
    for (const v1::ModuleStats& module : report->modules()) {
      if (module.path() == "model") calls = module.calls();
    }
    EXPECT_EQ(calls, 3u + 7u);  // both ranks' ranges: rank 1's from the file beside
    ASSERT_EQ(report->left_alone_files_size(), 1);
    EXPECT_EQ(report->left_alone_files(0).rank(), 1);
    EXPECT_THAT(report->left_alone_files(0).problem(), HasSubstr(Usual(1) + " " + why));
    EXPECT_THAT(report->left_alone_files(0).problem(), HasSubstr(Beside(1)));

    // A second session, by another daemon start, goes to the same file beside it.
    StoreSession(1, "s-1b", 2);
    report = Report();
    ASSERT_TRUE(report.ok()) << report.status();
    calls = 0;
    for (const v1::ModuleStats& module : report->modules()) {
      if (module.path() == "model") calls = module.calls();
    }
    EXPECT_EQ(calls, 3u + 7u + 2u);
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<Catalog> catalog_;
};

TEST_F(LeftAloneFilesTest, ADirectoryInTheRankFilesPlaceStays) {
  ExpectStoredBeside([&] { ASSERT_TRUE(std::filesystem::create_directory(Usual(1))); },
                     "is a directory");
  EXPECT_TRUE(std::filesystem::is_directory(Usual(1)));
  EXPECT_TRUE(std::filesystem::is_empty(Usual(1)));
}

TEST_F(LeftAloneFilesTest, NothingIsWrittenThroughASymlink) {
  // A file outside the data directory, as /etc/passwd would be: byte for byte the same after.
  const std::string target = dir_.File("passwd");
  const std::string content = "root:x:0:0:root:/root:/bin/bash\n";
  std::ofstream(target, std::ios::binary) << content;
  ExpectStoredBeside([&] { std::filesystem::create_symlink(target, Usual(1)); },
                     "is a symbolic link to " + target);
  EXPECT_TRUE(std::filesystem::is_symlink(Usual(1)));
  EXPECT_EQ(Bytes(target), content);
  EXPECT_FALSE(std::filesystem::exists(target + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(target + "-shm"));
}

// A reader may write too (it upgrades an older file's schema in place), so a report never opens
// a link either, even one to a sound rank file: the rank is named unreadable instead.
TEST_F(LeftAloneFilesTest, AReportNeverOpensALink) {
  StoreSession(0, "s-0", 3);
  StoreSession(1, "s-1", 4);
  const std::string elsewhere = dir_.File("elsewhere.sqlite");
  std::filesystem::rename(Usual(1), elsewhere);
  std::filesystem::create_symlink(elsewhere, Usual(1));
  const std::string before = Bytes(elsewhere);

  absl::StatusOr<v1::Report> report = Report();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->ranks_size(), 1);
  EXPECT_EQ(report->ranks(0).rank(), 0);
  ASSERT_EQ(report->unreadable_ranks_size(), 1);
  EXPECT_THAT(report->unreadable_ranks(0).problem(),
              HasSubstr(Usual(1) + " is a symbolic link to " + elsewhere));
  EXPECT_EQ(Bytes(elsewhere), before);
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "-shm"));
}

TEST_F(LeftAloneFilesTest, ANewerDaemonsFileStaysAsItIs) {
  std::string before;
  ExpectStoredBeside(
      [&] {
        // A newer flopscoped's file: a rank file whose schema_version is beyond ours.
        ASSERT_TRUE(RankStore::Open(Usual(1)).ok());
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(Usual(1).c_str(), &db), SQLITE_OK);
        ASSERT_EQ(
            sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr),
            SQLITE_OK);
        sqlite3_close(db);
        before = Bytes(Usual(1));
      },
      "is a newer flopscoped's file (schema version 99");
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(Bytes(Usual(1)), before);
}

TEST_F(LeftAloneFilesTest, AStartNamesTheFileBesideAndANewCatalogListsIt) {
  ASSERT_TRUE(std::filesystem::create_directory(Usual(2)));
  StoreSession(2, "s-2", 4);
  // Neither moved aside as damaged, nor touched.
  EXPECT_TRUE(QuarantineDamagedFiles(dir_.path()).empty());
  EXPECT_TRUE(std::filesystem::is_directory(Usual(2)));
  EXPECT_TRUE(std::filesystem::exists(Beside(2)));

  // The catalog lost: the rank comes back from the file beside the directory.
  catalog_.reset();
  std::filesystem::remove(CatalogPath(dir_.path()));
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(CatalogPath(dir_.path()));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(RelistRankFiles(dir_.path(), catalog->get()), 1u);
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = (*catalog)->ListRanks(kJob);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0].rank(), 2);
  EXPECT_EQ((*ranks)[0].range_events(), 4u);
}

TEST_F(LeftAloneFilesTest, OnceTheEntryIsGoneTheRankStaysInTheFileBeside) {
  ASSERT_TRUE(std::filesystem::create_directory(Usual(1)));
  StoreSession(1, "s-1", 5);
  std::filesystem::remove(Usual(1));
  StoreSession(1, "s-1b", 6);
  EXPECT_FALSE(std::filesystem::exists(Usual(1)));
  absl::StatusOr<v1::Report> report = Report();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->left_alone_files_size(), 0);  // nothing left alone any more: one file
  ASSERT_EQ(report->modules_size(), 1);
  EXPECT_EQ(report->modules(0).calls(), 5u + 6u);
}

TEST_F(LeftAloneFilesTest, WhenTheFileBesideMustBeLeftAloneTooTheRankIsRefusedByName) {
  ASSERT_TRUE(std::filesystem::create_directory(Usual(1)));
  ASSERT_TRUE(std::filesystem::create_directory(Beside(1)));
  StoreRegistry stores(dir_.path());
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores.Acquire(kJob, 1);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(Usual(1)));
  EXPECT_THAT(store.status().message(), HasSubstr(Beside(1)));
}

}  // namespace
}  // namespace flopscope::daemon
