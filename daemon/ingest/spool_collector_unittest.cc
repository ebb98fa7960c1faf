// The collector of orphaned spools stops between batches when the daemon stops: a stop does not
// wait for a whole file's replay, and the rest of the file is delivered at the next start. A
// made-counts file left without a spool is charged, as killed, to the session it names. An old
// orphan holding no record is removed. Spools are delivered only as their real owner's: not from
// a directory named for another uid, not of a uid without a user, not an earlier user's.

#include "daemon/ingest/spool_collector.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/made_counts_page.h"
#include "common/spool/spool_file.h"
#include "common/spool_dir.h"
#include "common/sqlite/sqlite_db.h"
#include "common/sqlite/sqlite_statement.h"
#include "daemon/catalog/catalog.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/store_registry.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

constexpr int kSpooledBatches = 3;
constexpr int kRangesPerBatch = 10;

// The daemon the tests' sessions were aimed at, and the folder of a spool directory for it.
constexpr char kThisDaemon[] = "unix:/run/test/flopscoped.sock";
std::string ThisDaemonsFolder() { return SpoolDestinationName(kThisDaemon); }
SpoolCollector::Destinations ThisDaemon() { return {{ThisDaemonsFolder()}, false}; }

// A spool file left by an ended process aimed at `daemon`: its hello and kSpooledBatches batches,
// in its folder of `spool_dir`, unlocked.
std::string LeaveOrphan(const std::string& spool_dir,
                        const std::string& folder_name = ThisDaemonsFolder()) {
  std::string error;
  EXPECT_TRUE(SpoolFile::PrepareDirectory(spool_dir, &error)) << error;
  const std::string folder = spool_dir + "/" + folder_name;
  EXPECT_TRUE(SpoolFile::PrepareDirectory(folder, &error)) << error;
  v1::UpMessage hello;
  *hello.mutable_hello() = fixtures::Hello("job", 0, "s-orphan");
  std::unique_ptr<SpoolFile> file = SpoolFile::Create(folder, hello, 1 << 30, &error);
  EXPECT_NE(file, nullptr) << error;
  if (file == nullptr) return "";
  for (uint64_t seq = 1; seq <= kSpooledBatches; ++seq) {
    v1::UpMessage up;
    v1::Batch& batch = *up.mutable_batch();
    batch.set_seq(seq);
    if (seq == 1) fixtures::AddPath(batch, 1, 0, "model");
    for (int i = 0; i < kRangesPerBatch; ++i) {
      fixtures::AddRange(batch, 1, static_cast<int64_t>(seq) * 10'000 + i * 100, 50);
    }
    SpoolFile::Entry entry;
    EXPECT_TRUE(file->Append(seq, up, kRangesPerBatch, &entry));
  }
  return SpoolFile::List(folder).front();  // the file stays when `file` closes
}

absl::StatusOr<std::string> AnyoneMayWrite(uid_t, const std::string& job_id) { return job_id; }

// The first column of the first row `sql` selects in rank 2's file of job "job" ("" for none).
std::string OneValue(const std::string& data_dir, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::OpenReadOnly(RankFilePath(data_dir, "job", 2));
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return "";
  absl::StatusOr<std::unique_ptr<SqliteStatement>> query = (*db)->Prepare(sql);
  EXPECT_TRUE(query.ok()) << query.status();
  if (!query.ok()) return "";
  absl::StatusOr<bool> row = (*query)->Step();
  return row.ok() && *row ? (*query)->ColumnString(0) : "";
}

// A data dir with its catalog and stores, and a spool directory for the collector to find.
class SpoolCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::create_directories(data_dir_));
    std::string error;
    ASSERT_TRUE(SpoolFile::PrepareDirectory(spool_dir_, &error)) << error;
    ASSERT_TRUE(SpoolFile::PrepareDirectory(folder_, &error)) << error;
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(CatalogPath(data_dir_));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    ingest_ = std::make_unique<IngestPath>(&stores_, catalog_.get());
  }

  fixtures::ScopedTempDir dir_;
  const std::string data_dir_ = dir_.path() + "/data";
  const std::string spool_dir_ = dir_.path() + "/spool";
  const std::string folder_ = spool_dir_ + "/" + ThisDaemonsFolder();
  std::unique_ptr<Catalog> catalog_;
  StoreRegistry stores_{data_dir_};
  std::unique_ptr<IngestPath> ingest_;
};

TEST_F(SpoolCollectorTest, AStopBetweenBatchesLeavesTheRestForTheNextStart) {
  const std::string orphan = LeaveOrphan(spool_dir_);

  // The daemon stops (the collector is destroyed) while the first batch is being committed.
  absl::Notification first_batch;
  auto collector = std::make_unique<SpoolCollector>(std::vector<std::string>{spool_dir_},
                                                    ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  ingest_->SetCommittedHook([&](const v1::SessionHello&, const v1::Batch&) {
    if (first_batch.HasBeenNotified()) return;
    first_batch.Notify();
    absl::SleepFor(absl::Milliseconds(300));  // the destructor marks the stop meanwhile
  });
  collector->Start(absl::Hours(1));
  first_batch.WaitForNotification();
  collector.reset();
  EXPECT_TRUE(std::filesystem::exists(orphan)) << "the replay ran to the file's end";

  // The next start delivers the rest, once.
  SpoolCollector next({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = next.CollectOnce();
  EXPECT_EQ(outcome.files, 1u);
  EXPECT_EQ(outcome.batches, static_cast<uint64_t>(kSpooledBatches - 1));
  EXPECT_FALSE(std::filesystem::exists(orphan));
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_.Acquire("job", 0);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Totals().range_events,
            static_cast<uint64_t>(kSpooledBatches * kRangesPerBatch));
}

TEST_F(SpoolCollectorTest, AnOldEmptyOrphanIsRemovedNotRefusedAndTheOthersAreDelivered) {
  const std::string orphan = LeaveOrphan(spool_dir_);
  // An injector older than the spool's rename at creation ended between creating its spool and
  // writing into it, over a minute ago.
  const std::string empty = folder_ + "/s-empty" + SpoolFile::kSuffix;
  std::ofstream(empty) << "";
  const timespec old[2] = {{time(nullptr) - 2 * SpoolCollector::kEmptyOrphanAgeS, 0},
                           {time(nullptr) - 2 * SpoolCollector::kEmptyOrphanAgeS, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, empty.c_str(), old, 0), 0);

  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.emptied, 1u);
  EXPECT_EQ(outcome.refused, 0u);
  EXPECT_EQ(outcome.files, 1u);
  EXPECT_EQ(outcome.records, static_cast<uint64_t>(kSpooledBatches * kRangesPerBatch));
  EXPECT_FALSE(std::filesystem::exists(empty));
  EXPECT_FALSE(std::filesystem::exists(orphan));
}

TEST_F(SpoolCollectorTest, AMadeCountsFileWithoutASpoolIsChargedToTheSessionItNames) {
  std::string error;
  // A process killed before its transport made a spool: only its made-counts file is left.
  MadeSession session;
  session.session_id = "s-early";
  session.job_id = "job";
  session.rank = 2;
  session.world_size = 4;
  session.host = "node";
  session.injector_version = "test";
  constexpr uint64_t kMade = 1234;
  const std::string made_path = folder_ + "/s-early" + MadeCountsPage::kSuffix;
  {
    std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(made_path, session, &error);
    ASSERT_NE(page, nullptr) << error;
    page->Acquire().Add(kMade);
  }  // unlocked: its writer is gone

  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.made_alone, 1u);
  EXPECT_EQ(outcome.refused, 0u);
  EXPECT_FALSE(std::filesystem::exists(made_path));
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_.Acquire("job", 2);
  ASSERT_TRUE(store.ok()) << store.status();
  const RankTotals totals = (*store)->Totals();
  EXPECT_EQ(totals.sessions, 1u);
  EXPECT_EQ(totals.range_events, 0u);
  static_assert(v1::LOSS_CAUSE_KILLED == 13);
  EXPECT_EQ(totals.losses.at(v1::LOSS_CAUSE_KILLED), kMade);
  // No drain began (a SIGKILL): nothing names a signal.
  EXPECT_EQ(OneValue(data_dir_, "SELECT gpu_status FROM sessions"),
            "unknown: the process ended before its transport started");
  EXPECT_EQ(OneValue(data_dir_, "SELECT COUNT(*) FROM metadata"), "0");
}

// A process a Ctrl-C's drain began in but never finished (before its transport started): its
// made-counts file names SIGINT, so its session is said to have been ended by SIGINT, not
// guessed at. What it made (the drain's own record included) is still charged as killed; the
// daemon's row naming the signal is no record of the process's.
TEST_F(SpoolCollectorTest, AMadeCountsFileNamingTheSignalOfACutShortDrainNamesIt) {
  std::string error;
  MadeSession session;
  session.session_id = "s-ctrl-c";
  session.job_id = "job";
  session.rank = 2;
  session.world_size = 4;
  constexpr uint64_t kMade = 77;
  const std::string made_path = folder_ + "/s-ctrl-c" + MadeCountsPage::kSuffix;
  {
    std::unique_ptr<MadeCountsPage> page = MadeCountsPage::Create(made_path, session, &error);
    ASSERT_NE(page, nullptr) << error;
    page->Acquire().Add(kMade);
    page->NameEndSignal(SIGINT);
  }

  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  EXPECT_EQ(collector.CollectOnce().made_alone, 1u);
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_.Acquire("job", 2);
  ASSERT_TRUE(store.ok()) << store.status();
  static_assert(v1::LOSS_CAUSE_KILLED == 13 && v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL == 12);
  EXPECT_EQ((*store)->Totals().losses.at(v1::LOSS_CAUSE_KILLED), kMade);
  EXPECT_EQ((*store)->Totals().losses.at(v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL), 1u);
  EXPECT_EQ(OneValue(data_dir_, "SELECT gpu_status FROM sessions"),
            "unknown: the process was ended by SIGINT (Ctrl-C) before its transport started");
  EXPECT_EQ(OneValue(data_dir_,
                     "SELECT group_concat(key || '=' || value) FROM metadata WHERE sid = "
                     "(SELECT sid FROM sessions WHERE session_id = 's-ctrl-c')"),
            "process.end_signal_cut_short=SIGINT");
}

TEST_F(SpoolCollectorTest, AMadeCountsFileWhoseSessionIsRefusedStays) {
  std::string error;
  MadeSession session;
  session.session_id = "s-bad";
  session.job_id = "../escape";  // not a job id: validated like a hello
  const std::string made_path = folder_ + "/s-bad" + MadeCountsPage::kSuffix;
  ASSERT_NE(MadeCountsPage::Create(made_path, session, &error), nullptr) << error;

  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.made_alone, 0u);
  EXPECT_EQ(outcome.refused, 1u);
  EXPECT_TRUE(std::filesystem::exists(made_path));
}

TEST_F(SpoolCollectorTest, AnOrphansRecordsWaitUntilItIsDelivered) {
  LeaveOrphan(spool_dir_);
  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  SpooledRecords during;  // as the query side sees them while the file is being delivered
  ingest_->SetCommittedHook([&](const v1::SessionHello&, const v1::Batch&) {
    if (during.empty()) during = collector.WaitingRecords();
  });
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 1u);
  ASSERT_EQ(during.count("job"), 1u);
  EXPECT_EQ(during.at("job").at(0), static_cast<uint64_t>(kSpooledBatches * kRangesPerBatch));
  EXPECT_TRUE(collector.WaitingRecords().empty()) << "delivered: waiting no more";
}

TEST_F(SpoolCollectorTest, ANudgeDeliversNowRatherThanAtTheNextPeriod) {
  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  collector.Start(absl::Hours(1));   // its first pass finds nothing
  absl::SleepFor(absl::Seconds(1));  // and is over long before this
  const std::string orphan = LeaveOrphan(spool_dir_);
  collector.Nudge();  // a stream ended
  for (int i = 0; i < 100 && std::filesystem::exists(orphan); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(std::filesystem::exists(orphan)) << "no pass within 5 s of the nudge";

  // Stopped, the collector is still there for a stream's end to nudge, and does nothing.
  collector.Stop();
  const std::string after_stop = LeaveOrphan(spool_dir_);
  collector.Nudge();
  absl::SleepFor(SpoolCollector::kNudgeSettle + absl::Milliseconds(500));
  EXPECT_TRUE(std::filesystem::exists(after_stop)) << "a stopped collector delivered";
}

TEST(SpoolDirectoryNameTest, TheUidAPathNames) {
  EXPECT_EQ(SpoolCollector::UidNamedBy("/var/tmp/flopscope-spool-1004"), 1004u);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/var/tmp/flopscope-spool-1004/"), 1004u);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/var/tmp/flopscope-spool-1004-Xa9b3c"), 1004u);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/run/user/1004/flopscope-spool"), 1004u);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/var/tmp/flopscope-spool-x1"), std::nullopt);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/scratch/my-spool"), std::nullopt);
  EXPECT_EQ(SpoolCollector::UidNamedBy("/home/u/flopscope-spool"), std::nullopt);
}

TEST_F(SpoolCollectorTest, ADirectoryNamedForAnotherUidIsNotDeliveredAsItsOwners) {
  // Anyone may make /var/tmp/flopscope-spool-<uid> for another uid first: what is in it is the
  // maker's, whatever the name says.
  const std::string squatted = dir_.path() + "/flopscope-spool-" + std::to_string(geteuid() + 1);
  const std::string orphan = LeaveOrphan(squatted);
  SpoolCollector collector({dir_.path() + "/flopscope-spool-*"}, ThisDaemon(), ingest_.get(),
                           AnyoneMayWrite);
  SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 0u);
  EXPECT_EQ(outcome.refused, 1u);
  EXPECT_TRUE(std::filesystem::exists(orphan));
  EXPECT_NE(SpoolCollector::DirectoryProblem(squatted, geteuid())
                .find(absl::StrCat("names uid ", geteuid() + 1, " but belongs to uid ", geteuid())),
            std::string::npos);
  // The injector's fallback of the same user, named for its owner, is delivered.
  const std::string fallback =
      dir_.path() + "/flopscope-spool-" + std::to_string(geteuid()) + "-Ab12Cd";
  std::filesystem::rename(squatted, fallback);
  outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 1u);
  EXPECT_EQ(outcome.refused, 0u);
}

TEST_F(SpoolCollectorTest, AUidWithoutAUserIsLeftAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a spool to a uid without a user";
  const std::string orphan = LeaveOrphan(spool_dir_);
  constexpr uid_t kNobodyEver = 3'999'999;  // no passwd entry on any test host
  ASSERT_EQ(chown(spool_dir_.c_str(), kNobodyEver, kNobodyEver), 0);
  ASSERT_EQ(chown(folder_.c_str(), kNobodyEver, kNobodyEver), 0);
  ASSERT_EQ(chown(orphan.c_str(), kNobodyEver, kNobodyEver), 0);
  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 0u);
  EXPECT_EQ(outcome.refused, 1u);
  EXPECT_TRUE(std::filesystem::exists(orphan));
  EXPECT_NE(SpoolCollector::DirectoryProblem(spool_dir_, kNobodyEver).find("has no passwd entry"),
            std::string::npos);
}

TEST_F(SpoolCollectorTest, ASpoolOlderThanItsOwnersHomeIsAnEarlierUsersAndLeftAlone) {
  const std::optional<std::string> home = SpoolCollector::HomeOf(geteuid());
  struct statx made;
  if (!home.has_value() || home->empty() ||
      statx(AT_FDCWD, home->c_str(), 0, STATX_BTIME, &made) != 0 ||
      (made.stx_mask & STATX_BTIME) == 0 || made.stx_btime.tv_sec < 1'000'000'000) {
    GTEST_SKIP() << "the home directory's filesystem keeps no birth time here";
  }
  const std::string orphan = LeaveOrphan(spool_dir_);
  // Last written in 2001, before this user's home was made: a reused uid's predecessor's.
  const timespec old[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, orphan.c_str(), old, 0), 0);
  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 0u);
  EXPECT_EQ(outcome.refused, 1u);
  EXPECT_NE(SpoolCollector::PredatesOwner(orphan, geteuid()).find("earlier user"),
            std::string::npos);
}

// Issue 32: records aimed at a daemon that was down reached another daemon of the same user
// (any daemon took every orphan of the user's spool directory).
TEST_F(SpoolCollectorTest, ASpoolAimedAtAnotherDaemonIsLeftForIt) {
  const std::string other = SpoolDestinationName("unix:/run/test/other.sock");
  const std::string theirs = LeaveOrphan(spool_dir_, other);
  const std::string loose = spool_dir_ + "/s-loose" + SpoolFile::kSuffix;  // aimed at no one
  std::filesystem::copy_file(theirs, loose);

  SpoolCollector mine({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  SpoolCollector::Outcome outcome = mine.CollectOnce();
  EXPECT_EQ(outcome.files, 0u);
  EXPECT_EQ(outcome.refused, 0u);  // not refused: not ours to look at
  EXPECT_TRUE(std::filesystem::exists(theirs));
  EXPECT_TRUE(stores_.Acquire("job", 0).ok());  // a store may open; it holds nothing
  EXPECT_EQ((*stores_.Acquire("job", 0))->Totals().range_events, 0u);

  // The daemon it was aimed at delivers it.
  SpoolCollector its_own({spool_dir_}, {{other}, false}, ingest_.get(), AnyoneMayWrite);
  outcome = its_own.CollectOnce();
  EXPECT_EQ(outcome.files, 1u);
  EXPECT_FALSE(std::filesystem::exists(theirs));
  EXPECT_TRUE(std::filesystem::exists(loose)) << "a spool in no folder was aimed at no daemon";
}

TEST_F(SpoolCollectorTest, ADaemonTheUserNamesDeliversEveryFolder) {
  const std::string first = LeaveOrphan(spool_dir_, SpoolDestinationName("unix:/a.sock"));
  const std::string second = LeaveOrphan(spool_dir_, SpoolDestinationName("unix:/b.sock"));
  SpoolCollector any({spool_dir_}, {{}, true}, ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = any.CollectOnce();
  EXPECT_EQ(outcome.refused, 0u);
  EXPECT_GE(outcome.files, 1u);  // both sessions are "s-orphan": the second is a duplicate
  EXPECT_FALSE(std::filesystem::exists(first));
  EXPECT_FALSE(std::filesystem::exists(second));
}

TEST_F(SpoolCollectorTest, AFolderOthersMayWriteIsRefused) {
  const std::string orphan = LeaveOrphan(spool_dir_);
  ASSERT_EQ(chmod(folder_.c_str(), 0777), 0);
  SpoolCollector collector({spool_dir_}, ThisDaemon(), ingest_.get(), AnyoneMayWrite);
  const SpoolCollector::Outcome outcome = collector.CollectOnce();
  EXPECT_EQ(outcome.files, 0u);
  EXPECT_EQ(outcome.refused, 1u);
  EXPECT_TRUE(std::filesystem::exists(orphan));
  EXPECT_NE(
      SpoolCollector::FolderProblem({spool_dir_, folder_}, geteuid()).find("only it may write"),
      std::string::npos);
}

}  // namespace
}  // namespace flopscope::daemon
