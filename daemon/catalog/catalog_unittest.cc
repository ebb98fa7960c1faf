#include "daemon/catalog/catalog.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/store/disk_space.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    catalog_.reset();
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir_.File("catalog.sqlite"));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  std::vector<v1::JobInfo> Jobs() {
    absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? *jobs : std::vector<v1::JobInfo>{};
  }

  std::vector<v1::RankInfo> Ranks(const std::string& job) {
    absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job);
    EXPECT_TRUE(ranks.ok()) << ranks.status();
    return ranks.ok() ? *ranks : std::vector<v1::RankInfo>{};
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<Catalog> catalog_;
};

TEST_F(CatalogTest, EmptyCatalogListsNothing) {
  EXPECT_TRUE(Jobs().empty());
  EXPECT_TRUE(Ranks("nope").empty());
}

TEST_F(CatalogTest, ConnectedSessionIsListedWithItsIdentity) {
  v1::SessionHello hello = fixtures::Hello("bert", 1, "node-1-4243-1");
  hello.mutable_layout()->set_dp_size(2);
  hello.set_gpu_status("ok");
  ASSERT_TRUE(catalog_->SessionConnected(hello, 1000).ok());

  std::vector<v1::JobInfo> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id(), "bert");
  EXPECT_EQ(jobs[0].ranks(), 1u);
  EXPECT_EQ(jobs[0].connected_sessions(), 1u);
  EXPECT_EQ(jobs[0].first_seen_ns(), 1000);

  std::vector<v1::RankInfo> ranks = Ranks("bert");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].job_id(), "bert");
  EXPECT_EQ(ranks[0].rank(), 1);
  EXPECT_EQ(ranks[0].host(), "node-1");
  EXPECT_EQ(ranks[0].pid(), 4243);
  EXPECT_EQ(ranks[0].session_id(), "node-1-4243-1");
  EXPECT_EQ(ranks[0].world_size(), 2);
  EXPECT_EQ(ranks[0].layout().dp_size(), 2u);
  ASSERT_EQ(ranks[0].devices_size(), 1);
  EXPECT_EQ(ranks[0].devices(0).name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(ranks[0].gpu_status(), "ok");
  EXPECT_EQ(ranks[0].command(), "python train.py");
  EXPECT_TRUE(ranks[0].connected());
}

TEST_F(CatalogTest, TotalsReplaceThePreviousOnes) {
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "s0"), 1000).ok());
  RankTotals totals;
  totals.sessions = 1;
  totals.range_events = 10;
  totals.kernels = 100;
  totals.losses[v1::LOSS_CAUSE_BUFFER_FULL] = 3;
  ASSERT_TRUE(catalog_->UpdateTotals("bert", 0, totals, 2000).ok());
  totals.kernels = 150;
  totals.losses[v1::LOSS_CAUSE_CUPTI_DROPPED] = 2;
  ASSERT_TRUE(catalog_->UpdateTotals("bert", 0, totals, 3000).ok());

  std::vector<v1::RankInfo> ranks = Ranks("bert");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].kernels(), 150u);
  EXPECT_EQ(ranks[0].range_events(), 10u);
  EXPECT_EQ(ranks[0].sessions(), 1u);
  EXPECT_EQ(ranks[0].last_seen_ns(), 3000);
  ASSERT_EQ(ranks[0].losses_size(), 2);
  EXPECT_EQ(ranks[0].losses(0).cause(), v1::LOSS_CAUSE_BUFFER_FULL);
  EXPECT_EQ(ranks[0].losses(0).records(), 3u);
  EXPECT_EQ(ranks[0].losses(1).cause(), v1::LOSS_CAUSE_CUPTI_DROPPED);

  std::vector<v1::JobInfo> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].kernels(), 150u);
  EXPECT_EQ(jobs[0].lost_records(), 5u);
  EXPECT_EQ(jobs[0].last_seen_ns(), 3000);
}

TEST_F(CatalogTest, ConnectedCountsOpenStreams) {
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "old"), 1000).ok());
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "new"), 1100).ok());
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 1, "other"), 1100).ok());
  EXPECT_EQ(Jobs()[0].connected_sessions(), 3u);
  EXPECT_EQ(Ranks("bert")[0].session_id(), "new");  // the latest session speaks for the rank

  ASSERT_TRUE(catalog_->SessionDisconnected("bert", 0, 1200).ok());
  EXPECT_TRUE(Ranks("bert")[0].connected());
  ASSERT_TRUE(catalog_->SessionDisconnected("bert", 0, 1300).ok());
  ASSERT_TRUE(catalog_->SessionDisconnected("bert", 0, 1300).ok());  // never below zero
  EXPECT_FALSE(Ranks("bert")[0].connected());
  EXPECT_EQ(Ranks("bert")[0].last_seen_ns(), 1300);
  EXPECT_EQ(Jobs()[0].connected_sessions(), 1u);
}

TEST_F(CatalogTest, RestartForgetsConnectionsButKeepsTheRest) {
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "s0"), 1000).ok());
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("gpt", 3, "s1"), 2000).ok());
  Reopen();
  std::vector<v1::JobInfo> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id(), "bert");  // by first appearance
  EXPECT_EQ(jobs[1].job_id(), "gpt");
  EXPECT_EQ(jobs[0].connected_sessions(), 0u);
  EXPECT_FALSE(Ranks("gpt")[0].connected());
  EXPECT_EQ(Ranks("gpt")[0].rank(), 3);
}

TEST_F(CatalogTest, RejectionsAreCountedPerRuleAndSummedOverSessions) {
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bad", 0, "s-a"), 1000).ok());
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bad", 1, "s-b"), 1000).ok());
  ASSERT_TRUE(catalog_->AddRejection("bad", 0, "s-a", "ranges", 40).ok());
  ASSERT_TRUE(catalog_->AddRejection("bad", 0, "s-a", "ranges", 2).ok());
  ASSERT_TRUE(catalog_->AddRejection("bad", 0, "s-c", "ranges", 8).ok());  // a later session
  ASSERT_TRUE(catalog_->AddRejection("bad", 0, "s-a", "kernels", 70).ok());
  ASSERT_TRUE(catalog_->AddRejection("bad", 1, "s-b", "seq", 5).ok());
  Reopen();  // persisted, not held in memory

  std::vector<v1::JobInfo> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].rejected_batches(), 5u);
  EXPECT_EQ(jobs[0].rejected_records(), 125u);
  std::vector<v1::RankInfo> ranks = Ranks("bad");
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(ranks[0].rejections_size(), 2);
  EXPECT_EQ(ranks[0].rejections(0).rule(), "kernels");
  EXPECT_EQ(ranks[0].rejections(0).batches(), 1u);
  EXPECT_EQ(ranks[0].rejections(0).records(), 70u);
  EXPECT_EQ(ranks[0].rejections(1).rule(), "ranges");
  EXPECT_EQ(ranks[0].rejections(1).batches(), 3u);
  EXPECT_EQ(ranks[0].rejections(1).records(), 50u);
  ASSERT_EQ(ranks[1].rejections_size(), 1);
  EXPECT_EQ(ranks[1].rejections(0).rule(), "seq");
}

// A version 1 catalog (before rank_rejections) is upgraded in place when opened, and keeps
// what it listed.
TEST(CatalogUpgradeTest, VersionOneCatalogGainsRejections) {
  fixtures::ScopedTempDir dir;
  const std::string path = dir.File("catalog.sqlite");
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenWithSchema(
        path,
        "CREATE TABLE schema_version(version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES (1);"
        "CREATE TABLE jobs(job_id TEXT PRIMARY KEY, first_seen_ns INTEGER NOT NULL, "
        "last_seen_ns INTEGER NOT NULL);"
        "INSERT INTO jobs VALUES ('old', 5, 6);");
    ASSERT_TRUE(db.ok()) << db.status();
  }
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(path);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  ASSERT_TRUE((*catalog)->AddRejection("old", 0, "s", "limits", 3).ok());
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = (*catalog)->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job_id(), "old");
  EXPECT_EQ((*jobs)[0].rejected_records(), 3u);
  catalog->reset();
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<std::unique_ptr<SqliteStatement>> version =
      (*db)->Prepare("SELECT MAX(version) FROM schema_version");
  ASSERT_TRUE(version.ok());
  ASSERT_TRUE(*(*version)->Step());
  EXPECT_EQ((*version)->ColumnInt(0), 3);  // version 3 (job owners) came with it
}

// Version 3: a job listed before owners were recorded belongs to the daemon's user (the legacy
// owner), and a claim by another uid does not take it over; a new job is its first writer's.
TEST(CatalogUpgradeTest, JobsWithoutAnOwnerRowBelongToTheLegacyOwner) {
  fixtures::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir.File("catalog.sqlite"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  ASSERT_TRUE((*catalog)->SessionConnected(fixtures::Hello("old", 0, "s"), 5).ok());
  constexpr uint32_t kDaemonUid = 7;
  EXPECT_EQ(*(*catalog)->JobOwner("old", kDaemonUid), kDaemonUid);
  EXPECT_EQ(*(*catalog)->ClaimJob("old", 1001, kDaemonUid), kDaemonUid);
  EXPECT_EQ(*(*catalog)->ClaimJob("new", 1001, kDaemonUid), 1001u);
  EXPECT_EQ(*(*catalog)->ClaimJob("new", 1002, kDaemonUid), 1001u);
  EXPECT_EQ(*(*catalog)->JobOwner("missing", kDaemonUid), std::nullopt);
  ASSERT_TRUE((*catalog)->SessionConnected(fixtures::Hello("new", 0, "s"), 5).ok());
  absl::StatusOr<absl::flat_hash_map<std::string, uint32_t>> owners =
      (*catalog)->JobOwners(kDaemonUid);
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_EQ(owners->at("old"), kDaemonUid);
  EXPECT_EQ(owners->at("new"), 1001u);
}

// Queries read on their own connection: a write stuck behind the file's write lock (here another
// connection's transaction; in the daemon a long checkpoint), with the catalog's writer mutex held
// all the while, holds up no listing, and the listings show the last committed state.
TEST_F(CatalogTest, QueriesDoNotWaitForAStuckWrite) {
  ASSERT_TRUE(catalog_->ClaimJob("bert", 1001, 0).ok());
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "node-1-4243-1"), 1000).ok());
  absl::StatusOr<std::unique_ptr<SqliteDb>> other =
      SqliteDb::OpenExisting(dir_.File("catalog.sqlite"));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE((*other)->Exec("BEGIN IMMEDIATE").ok());  // holds the write lock
  absl::Notification writing;
  std::thread writer([&] {
    writing.Notify();
    // Waits for the lock (SQLite's busy timeout: 5 s) under the writer mutex.
    catalog_->SessionDisconnected("bert", 0, 2000).IgnoreError();
  });
  writing.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(50));  // the writer is inside its transaction by now

  const absl::Time before = absl::Now();
  const std::vector<v1::RankInfo> ranks = Ranks("bert");
  const std::vector<v1::JobInfo> jobs = Jobs();
  absl::StatusOr<std::optional<uint32_t>> owner = catalog_->JobOwner("bert", 0);
  const absl::Duration took = absl::Now() - before;
  ASSERT_TRUE((*other)->Exec("COMMIT").ok());
  writer.join();

  // Through the writer's mutex they would have waited for the busy timeout.
  EXPECT_LT(took, absl::Seconds(2));
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_TRUE(ranks[0].connected());  // the disconnect was not committed yet
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].connected_sessions(), 1u);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(*owner, std::optional<uint32_t>(1001u));
  EXPECT_FALSE(Ranks("bert")[0].connected());  // and see it once it is
}

// The writers checkpoint the WAL themselves, outside the writer mutex (catalog.h): with many
// small commits it is still cut back, and once a reader's snapshot that held it lets go.
TEST_F(CatalogTest, ManySmallCommitsKeepTheWalSmall) {
  constexpr int kCommits = 400;
  constexpr uint64_t kPageBytes = 4096;  // SQLite's default page: each commit adds at least one
  const std::string wal = dir_.File("catalog.sqlite") + "-wal";
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("bert", 0, "node-1-4243-1"), 1).ok());
  // A reader in a snapshot: no checkpoint may copy past it, so the WAL grows meanwhile.
  absl::StatusOr<std::unique_ptr<SqliteDb>> reader =
      SqliteDb::OpenExisting(dir_.File("catalog.sqlite"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->Exec("BEGIN; SELECT COUNT(*) FROM ranks;").ok());
  RankTotals totals;
  for (int i = 1; i <= kCommits; ++i) {
    totals.range_events = i;
    ASSERT_TRUE(catalog_->UpdateTotals("bert", 0, totals, 1 + i).ok());
  }
  EXPECT_GE(std::filesystem::file_size(wal), kCommits * kPageBytes / 2);
  ASSERT_TRUE((*reader)->Exec("COMMIT").ok());
  const uint64_t before = catalog_->checkpoints();
  for (int i = kCommits + 1; i <= 2 * kCommits; ++i) {
    totals.range_events = i;
    ASSERT_TRUE(catalog_->UpdateTotals("bert", 0, totals, 1 + i).ok());
  }
  EXPECT_GT(catalog_->checkpoints(), before);
  // Cut back (journal_size_limit) when it restarted after the first full checkpoint.
  EXPECT_LT(std::filesystem::file_size(wal), kCommits * kPageBytes / 8);
  EXPECT_EQ(Ranks("bert")[0].range_events(), 2u * kCommits);
}

// A daemon killed mid-run (no close, no final checkpoint) loses no committed write: whatever
// the checkpoints had copied or not, the next open finds every commit.
TEST_F(CatalogTest, CommitsSurviveACrash) {
  constexpr int kCommits = 300;
  catalog_.reset();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir_.File("catalog.sqlite"));
    if (!catalog.ok()) _exit(2);
    RankTotals totals;
    for (int i = 1; i <= kCommits; ++i) {
      totals.kernels = i;
      if (!(*catalog)->SessionConnected(fixtures::Hello("crash", i % 8, "s"), i).ok()) _exit(3);
      if (!(*catalog)->UpdateTotals("crash", i % 8, totals, i).ok()) _exit(4);
    }
    _exit(0);  // as a crash: the connections stay open, nothing is checkpointed at exit
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Reopen();
  const std::vector<v1::RankInfo> ranks = Ranks("crash");
  ASSERT_EQ(ranks.size(), 8u);
  uint64_t last = 0;  // the highest kernels count written, by the last commit of each rank
  for (const v1::RankInfo& rank : ranks) last = std::max(last, rank.kernels());
  EXPECT_EQ(last, static_cast<uint64_t>(kCommits));
  for (const v1::RankInfo& rank : ranks) {
    // Rank r's last commit wrote the largest i <= kCommits with i % 8 == r.
    const int r = rank.rank();
    const int expected = kCommits - ((kCommits - r) % 8 + 8) % 8;
    EXPECT_EQ(rank.kernels(), static_cast<uint64_t>(expected)) << "rank " << r;
  }
}

// A file system of `size` bytes of its own (tmpfs), mounted for one test: needs root
// (CAP_SYS_ADMIN); ok() is false otherwise.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& where, const std::string& size) : where_(where) {
    std::filesystem::create_directories(where_);
    mounted_ = mount("tmpfs", where_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~ScopedTmpfs() {
    if (mounted_) umount2(where_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_; }

  // Takes every free block with a file; returns its path.
  std::string Fill() const {
    const std::string filler = where_ + "/filler";
    const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const std::string block(4096, 'x');
    while (fd >= 0 && write(fd, block.data(), block.size()) > 0) {
    }
    while (fd >= 0 && write(fd, block.data(), 1) > 0) {  // the last partial page
    }
    if (fd >= 0) close(fd);
    return filler;
  }

 private:
  const std::string where_;
  bool mounted_ = false;
};

// Writes to `catalog` until its WAL file grows: from then on each commit needs new blocks (a
// reader's snapshot, held by the caller, keeps the WAL from restarting at its beginning).
void WriteUntilTheWalGrows(Catalog& catalog, const std::string& path, const std::string& job) {
  const std::string wal = path + "-wal";
  const uintmax_t before = std::filesystem::file_size(wal);
  v1::ParallelLayout layout;
  for (int i = 1; i < 10000 && std::filesystem::file_size(wal) == before; ++i) {
    layout.set_dp_size(i);
    ASSERT_TRUE(catalog.SetAnnouncedLayout(job, 0, layout).ok());
  }
  ASSERT_GT(std::filesystem::file_size(wal), before);
}

// Campaign row 6b: a disk filled to zero by another program while a job runs. The ends of its
// sessions cannot be written (the WAL must grow: a reader's snapshot keeps the checkpoint from
// restarting it, as a long listing does); once space returns, the first listing shows the job
// ended, at the time each session ended, with no restart.
TEST_F(CatalogTest, EndsAFullDiskRefusedAreWrittenWhenSpaceReturns) {
  ScopedTmpfs disk(dir_.File("small"), "1m");
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<Catalog>> catalog =
      Catalog::Open(dir_.File("small/catalog.sqlite"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE((*catalog)->SessionConnected(fixtures::Hello("late3", rank, "s"), 1000).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> reader =
      SqliteDb::OpenExisting(dir_.File("small/catalog.sqlite"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->Exec("BEGIN; SELECT COUNT(*) FROM ranks;").ok());
  WriteUntilTheWalGrows(**catalog, dir_.File("small/catalog.sqlite"), "late3");
  const std::string filler = disk.Fill();

  for (int rank = 0; rank < 3; ++rank) {
    const absl::Status ended = (*catalog)->SessionDisconnected("late3", rank, 2000 + rank);
    EXPECT_TRUE(IsDiskFull(ended)) << ended;
  }
  EXPECT_EQ((*catalog)->pending_writes(), 3u);
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = (*catalog)->ListJobs();  // still full
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].connected_sessions(), 3u);

  ASSERT_EQ(unlink(filler.c_str()), 0);
  jobs = (*catalog)->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].connected_sessions(), 0u);
  EXPECT_EQ((*jobs)[0].last_seen_ns(), 2002);
  EXPECT_EQ((*catalog)->pending_writes(), 0u);
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = (*catalog)->ListRanks("late3");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  for (const v1::RankInfo& rank : *ranks) {
    EXPECT_FALSE(rank.connected()) << rank.rank();
    EXPECT_EQ(rank.last_seen_ns(), 2000 + rank.rank());
  }
  ASSERT_TRUE((*reader)->Exec("COMMIT;").ok());
}

// The ends and totals kept count and replace as written ones do, and a deleted job's go with it.
TEST_F(CatalogTest, KeptWritesAreMadeByTheNextWriteAndForgottenWithTheirJob) {
  ScopedTmpfs disk(dir_.File("small"), "1m");
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<Catalog>> catalog =
      Catalog::Open(dir_.File("small/catalog.sqlite"));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  for (const char* job : {"kept", "gone"}) {
    ASSERT_TRUE((*catalog)->SessionConnected(fixtures::Hello(job, 0, "a"), 1000).ok());
    ASSERT_TRUE((*catalog)->SessionConnected(fixtures::Hello(job, 0, "b"), 1000).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> reader =
      SqliteDb::OpenExisting(dir_.File("small/catalog.sqlite"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->Exec("BEGIN; SELECT COUNT(*) FROM ranks;").ok());
  WriteUntilTheWalGrows(**catalog, dir_.File("small/catalog.sqlite"), "kept");
  const std::string filler = disk.Fill();
  RankTotals totals;
  totals.sessions = 2;
  totals.range_events = 40;
  EXPECT_FALSE((*catalog)->UpdateTotals("kept", 0, totals, 1500).ok());
  EXPECT_FALSE((*catalog)->SessionDisconnected("kept", 0, 2000).ok());
  EXPECT_FALSE((*catalog)->SessionDisconnected("gone", 0, 2000).ok());
  EXPECT_FALSE((*catalog)->RetryPendingWrites().ok());
  ASSERT_EQ(unlink(filler.c_str()), 0);
  ASSERT_TRUE((*catalog)->DeleteJob("gone").ok());
  EXPECT_EQ((*catalog)->pending_writes(), 1u);                         // "gone"'s end went with it
  ASSERT_TRUE((*catalog)->SessionDisconnected("kept", 0, 3000).ok());  // makes the kept one too
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = (*catalog)->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job_id(), "kept");
  EXPECT_EQ((*jobs)[0].connected_sessions(), 0u);  // both of its streams ended
  EXPECT_EQ((*jobs)[0].range_events(), 40u);
  ASSERT_TRUE((*reader)->Exec("COMMIT;").ok());
}

}  // namespace
}  // namespace flopscope::daemon
