// JobPruner (whole-job deletion, the --max-disk pass, recovery of an interrupted prune) and
// QueryService::Prune (flopscope prune's choice and access checks).
#include "daemon/retention/job_pruner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/access/access_policy.h"
#include "daemon/catalog/catalog.h"
#include "daemon/query/query_service.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/store_registry.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr uid_t kAlice = 1000;
constexpr uid_t kMallory = 1001;
constexpr int64_t kHourNs = 3'600'000'000'000LL;

PeerIdentity Peer(uid_t uid) {
  PeerIdentity peer;
  peer.uid = uid;
  peer.gid = uid;
  return peer;
}

class JobPrunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(CatalogPath(dir_.path()));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    stores_ = std::make_unique<StoreRegistry>(dir_.path());
    access_ = std::make_unique<AccessControl>(&peers_, catalog_.get(), AccessRules{});
    query_ = std::make_unique<QueryService>(dir_.path(), catalog_.get());
    query_->SetAccessControl(access_.get());
    pruner_ = std::make_unique<JobPruner>(dir_.path(), catalog_.get(), stores_.get(),
                                          [this](const std::string& directory) {
                                            dropped_.push_back(directory);
                                            query_->DropReaders(directory);
                                          });
    query_->SetPruner(pruner_.get());
  }

  // A finished job of `ranks` ranks owned by `owner`, last seen at `seen_ns`, with `filler`
  // extra bytes in a file beside its rank files (so jobs differ in size).
  void AddJob(const std::string& job, int ranks, int64_t seen_ns, uid_t owner = kAlice,
              size_t filler = 0) {
    ASSERT_TRUE(access_->ClaimForWrite(Peer(owner), job).ok());
    for (int rank = 0; rank < ranks; ++rank) {
      absl::StatusOr<std::shared_ptr<RankStore>> store = stores_->Acquire(job, rank);
      ASSERT_TRUE(store.ok()) << store.status();
      const v1::SessionHello hello = fixtures::Hello(job, rank, job + "-s");
      ASSERT_TRUE(catalog_->SessionConnected(hello, seen_ns).ok());
      ASSERT_TRUE(catalog_->SessionDisconnected(job, rank, seen_ns).ok());
    }
    if (filler > 0) {
      std::ofstream(JobDirectory(dir_.path(), job) + "/filler") << std::string(filler, 'x');
    }
  }

  uint64_t Bytes(const std::string& job) { return *JobBytes(JobDirectory(dir_.path(), job)); }

  std::vector<std::string> Listed() {
    std::vector<std::string> ids;
    const absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    for (const v1::JobInfo& job : jobs.value_or(std::vector<v1::JobInfo>{})) {
      ids.push_back(job.job_id());
    }
    return ids;
  }

  bool OnDisk(const std::string& job) { return fs::exists(JobDirectory(dir_.path(), job)); }

  fixtures::ScopedTempDir dir_;
  PeerRegistry peers_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StoreRegistry> stores_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<JobPruner> pruner_;
  std::vector<std::string> dropped_;
};

TEST_F(JobPrunerTest, PruneRemovesFilesRowsAndReadersAndCounts) {
  AddJob("old", 2, 1000);
  AddJob("new", 1, 2000);
  const uint64_t old_bytes = Bytes("old");
  ASSERT_GT(old_bytes, 0u);
  absl::StatusOr<uint64_t> freed = pruner_->Prune("old", "test");
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, old_bytes);
  EXPECT_FALSE(OnDisk("old"));
  EXPECT_FALSE(fs::exists(PruneTombstone(dir_.path(), "old")));
  EXPECT_TRUE(OnDisk("new"));
  EXPECT_THAT(Listed(), ElementsAre("new"));
  EXPECT_THAT(*catalog_->ListRanks("old"), IsEmpty());
  EXPECT_EQ(*catalog_->JobOwner("old", 0), std::nullopt);  // no owner left behind either
  EXPECT_THAT(dropped_,
              ElementsAre(JobDirectory(dir_.path(), "old"), PruneTombstone(dir_.path(), "old")));
  EXPECT_EQ(pruner_->jobs_pruned(), 1u);
  EXPECT_EQ(pruner_->bytes_pruned(), old_bytes);
}

TEST_F(JobPrunerTest, RunningAndUnknownJobsAreRefused) {
  AddJob("live", 1, 1000);
  absl::StatusOr<std::shared_ptr<RankStore>> held = stores_->Acquire("live", 0);  // a stream
  ASSERT_TRUE(held.ok());
  absl::StatusOr<uint64_t> running = pruner_->Prune("live", "test");
  EXPECT_TRUE(absl::IsFailedPrecondition(running.status())) << running.status();
  EXPECT_THAT(std::string(running.status().message()), HasSubstr("is running"));
  EXPECT_TRUE(OnDisk("live"));
  EXPECT_TRUE(absl::IsNotFound(pruner_->Prune("ghost", "test").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(pruner_->Prune("../etc", "test").status()));
  // Connected in the catalog without an open store (an aggregator's view) counts as running.
  AddJob("connected", 1, 1000);
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("connected", 0, "c"), 1100).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(pruner_->Prune("connected", "t").status()));
}

TEST_F(JobPrunerTest, TheFenceRefusesStreamsWhileAJobIsPruned) {
  AddJob("job", 1, 1000);
  ASSERT_TRUE(stores_->BeginPrune("job").ok());
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_->Acquire("job", 0);
  EXPECT_TRUE(absl::IsUnavailable(store.status())) << store.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(stores_->BeginPrune("job")));  // one prune at a time
  stores_->EndPrune("job");
  EXPECT_TRUE(stores_->Acquire("job", 0).ok());
}

TEST_F(JobPrunerTest, AnInterruptedPruneIsFinishedAtStart) {
  AddJob("half", 1, 1000);
  AddJob("kept", 1, 1000);
  // A crash after step 2: the directory is a tombstone, the rows are still there.
  fs::rename(JobDirectory(dir_.path(), "half"), PruneTombstone(dir_.path(), "half"));
  EXPECT_EQ(pruner_->RecoverInterrupted(), 1u);
  EXPECT_FALSE(fs::exists(PruneTombstone(dir_.path(), "half")));
  EXPECT_THAT(Listed(), ElementsAre("kept"));
  EXPECT_TRUE(OnDisk("kept"));
  EXPECT_EQ(pruner_->RecoverInterrupted(), 0u);
}

TEST_F(JobPrunerTest, TheBudgetPassDeletesTheOldestFinishedJobsUntilTheRestFit) {
  AddJob("a", 1, 1000, kAlice, 4000);
  AddJob("b", 1, 2000, kAlice, 3000);
  AddJob("c", 1, 3000, kAlice, 2000);
  AddJob("d", 1, 4000, kAlice, 1000);
  absl::StatusOr<std::shared_ptr<RankStore>> held = stores_->Acquire("a", 0);  // a runs again
  ASSERT_TRUE(held.ok());
  const uint64_t total = Bytes("a") + Bytes("b") + Bytes("c") + Bytes("d");
  // Room for everything but b and one byte: b (oldest finished) and c go, a (running) stays.
  const uint64_t budget = total - Bytes("b") - 1;
  const BudgetPass pass = pruner_->EnforceBudget(BudgetPolicy{budget});
  EXPECT_EQ(pass.bytes_before, total);
  EXPECT_THAT(pass.pruned, ElementsAre("b", "c"));
  EXPECT_EQ(pass.bytes_after, Bytes("a") + Bytes("d"));
  EXPECT_FALSE(pass.only_running_left);
  EXPECT_THAT(Listed(), UnorderedElementsAre("a", "d"));
  EXPECT_TRUE(OnDisk("a") && OnDisk("d") && !OnDisk("b") && !OnDisk("c"));
  // Now only the running job would be left to delete: nothing goes, and the pass says so.
  const BudgetPass tight = pruner_->EnforceBudget(BudgetPolicy{Bytes("a") / 2});
  EXPECT_THAT(tight.pruned, ElementsAre("d"));
  EXPECT_TRUE(tight.only_running_left);
  EXPECT_TRUE(OnDisk("a"));
}

// Campaign row 5d with the catalog's owners: mallory's flood takes mallory's own finished jobs,
// never alice's job that has just ended; mallory's running job alone over its share refuses
// mallory's records, and alice's still go in.
TEST_F(JobPrunerTest, AFloodDeletesTheFloodersJobsAndRefusesItsRunningOne) {
  const int64_t now = absl::GetCurrentTimeNanos();
  AddJob("alice-old", 1, now - 10 * kHourNs, kAlice);
  AddJob("alice-new", 1, now - 1'000'000'000, kAlice);  // ended a second ago
  AddJob("flood-1", 1, now - 2 * kHourNs, kMallory, 300000);
  AddJob("flood-2", 1, now - kHourNs, kMallory, 300000);
  AddJob("flood-live", 1, now - kHourNs, kMallory, 600000);
  absl::StatusOr<std::shared_ptr<RankStore>> held = stores_->Acquire("flood-live", 0);
  ASSERT_TRUE(held.ok());
  BudgetPolicy policy;
  policy.max_bytes = Bytes("flood-live") + Bytes("alice-old");  // under mallory's running job
  policy.grace_ns = kHourNs / 60;
  const BudgetPass pass = pruner_->EnforceBudget(policy);
  EXPECT_THAT(pass.pruned, UnorderedElementsAre("flood-1", "flood-2"));
  EXPECT_TRUE(OnDisk("alice-old") && OnDisk("alice-new") && OnDisk("flood-live"));
  EXPECT_THAT(pass.refused, ElementsAre(kMallory));
  const absl::Status refused = pruner_->CheckWriter("flood-live");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("daemon disk full for uid 1001"));
  EXPECT_TRUE(pruner_->CheckWriter("alice-new").ok());
  held->reset();  // the flood ends, its grace passes: the next pass takes it, mallory is let in
  ASSERT_TRUE(stores_->OpenJobs().empty());
  policy.grace_ns = 0;
  const BudgetPass later = pruner_->EnforceBudget(policy);
  EXPECT_THAT(later.pruned, ElementsAre("flood-live"));
  EXPECT_THAT(later.refused, IsEmpty());
  EXPECT_TRUE(pruner_->CheckWriter("flood-live").ok());
  EXPECT_TRUE(OnDisk("alice-old") && OnDisk("alice-new"));
}

TEST_F(JobPrunerTest, StartPassesNowAndThenEveryPeriodUntilDestroyed) {
  AddJob("first", 1, 1000);
  pruner_->Start(BudgetPolicy{/*max_bytes=*/1}, absl::Milliseconds(20));
  const auto pruned = [this](uint64_t jobs) {
    for (int i = 0; i < 500 && pruner_->jobs_pruned() < jobs; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return pruner_->jobs_pruned();
  };
  EXPECT_EQ(pruned(1), 1u);
  EXPECT_FALSE(OnDisk("first"));
  AddJob("later", 1, 2000);  // a job finished after the first pass: a later pass takes it
  EXPECT_EQ(pruned(2), 2u);
  EXPECT_FALSE(OnDisk("later"));
  EXPECT_THAT(Listed(), IsEmpty());
  pruner_.reset();  // joins the thread
}

TEST_F(JobPrunerTest, PruneByNameChecksEveryJobFirst) {
  AddJob("mine", 1, 1000, kAlice);
  AddJob("theirs", 1, 1000, kMallory);
  v1::PruneRequest request;
  request.add_job_ids("mine");
  request.add_job_ids("theirs");
  absl::StatusOr<v1::PruneResponse> denied = query_->Prune(Peer(kAlice), request);
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();
  EXPECT_THAT(std::string(denied.status().message()), HasSubstr("may not prune job theirs"));
  EXPECT_TRUE(OnDisk("mine"));  // nothing went, not even the job alice may prune
  request.set_job_ids(1, "nobody");
  EXPECT_TRUE(absl::IsNotFound(query_->Prune(Peer(kAlice), request).status()));
  EXPECT_TRUE(OnDisk("mine"));
}

TEST_F(JobPrunerTest, DryRunListsWhatWouldGoAndDeletesNothing) {
  AddJob("mine", 2, 1000, kAlice, 500);
  v1::PruneRequest request;
  request.add_job_ids("mine");
  request.set_dry_run(true);
  absl::StatusOr<v1::PruneResponse> listed = query_->Prune(Peer(kAlice), request);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->jobs_size(), 1);
  EXPECT_EQ(listed->jobs(0).bytes(), Bytes("mine"));
  EXPECT_EQ(listed->jobs(0).ranks(), 2u);
  EXPECT_EQ(listed->bytes(), Bytes("mine"));
  EXPECT_TRUE(OnDisk("mine"));
  EXPECT_EQ(pruner_->jobs_pruned(), 0u);
}

TEST_F(JobPrunerTest, OlderThanTakesOnlyOldJobsTheCallerMayPruneAndKeepsRunningOnes) {
  const int64_t now = absl::GetCurrentTimeNanos();
  AddJob("old-mine", 1, now - 10 * kHourNs, kAlice);
  AddJob("old-running", 1, now - 10 * kHourNs, kAlice);
  AddJob("old-theirs", 1, now - 10 * kHourNs, kMallory);
  AddJob("new-mine", 1, now, kAlice);
  absl::StatusOr<std::shared_ptr<RankStore>> held = stores_->Acquire("old-running", 0);
  ASSERT_TRUE(held.ok());
  v1::PruneRequest request;
  request.set_older_than_ns(5 * kHourNs);
  absl::StatusOr<v1::PruneResponse> pruned = query_->Prune(Peer(kAlice), request);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_EQ(pruned->jobs_size(), 1);
  EXPECT_EQ(pruned->jobs(0).job_id(), "old-mine");
  EXPECT_THAT(pruned->kept_running(), ElementsAre("old-running"));
  EXPECT_THAT(Listed(), UnorderedElementsAre("old-running", "old-theirs", "new-mine"));
  // Root may prune anyone's.
  absl::StatusOr<v1::PruneResponse> by_root = query_->Prune(Peer(0), request);
  ASSERT_TRUE(by_root.ok()) << by_root.status();
  ASSERT_EQ(by_root->jobs_size(), 1);
  EXPECT_EQ(by_root->jobs(0).job_id(), "old-theirs");
}

TEST_F(JobPrunerTest, ARequestNamesJobsOrAnAgeNotBoth) {
  v1::PruneRequest request;
  EXPECT_TRUE(absl::IsInvalidArgument(query_->Prune(Peer(kAlice), request).status()));
  request.add_job_ids("x");
  request.set_older_than_ns(kHourNs);
  EXPECT_TRUE(absl::IsInvalidArgument(query_->Prune(Peer(kAlice), request).status()));
}

}  // namespace
}  // namespace flopscope::daemon
