// The disk budget's choice of jobs (disk_budget.h): by each user's share, the furthest over
// first, oldest first, never a running job nor one in its grace period, only as many as needed;
// the users refused instead; and the bytes of a job's directory.
#include "daemon/retention/disk_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "daemon/store/disk_space.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kNow = 1'000'000'000'000;
constexpr int64_t kMinuteNs = 60'000'000'000;

std::vector<JobUsage> Jobs() {
  // Seen at 300, 100, 200 (a running one at 50): 10 + 20 + 30 + 40 = 100 bytes, one owner.
  return {
      {"c", 300, 10, false}, {"a", 100, 20, false}, {"b", 200, 30, false}, {"live", 50, 40, true}};
}

std::vector<std::string> Doomed(std::vector<JobUsage> jobs, uint64_t max_bytes) {
  return PlanPrune(std::move(jobs), BudgetPolicy{max_bytes}, kNow).doomed;
}

TEST(PlanPruneTest, NothingWhenUnderTheBudget) {
  const PrunePlan plan = PlanPrune(Jobs(), BudgetPolicy{100}, kNow);
  EXPECT_THAT(plan.doomed, IsEmpty());
  EXPECT_THAT(plan.refused, IsEmpty());
}

TEST(PlanPruneTest, OldestFinishedJobsFirstAndOnlyAsManyAsNeeded) {
  EXPECT_THAT(Doomed(Jobs(), 99), ElementsAre("a"));       // 100 - 20 = 80
  EXPECT_THAT(Doomed(Jobs(), 79), ElementsAre("a", "b"));  // 80 - 30 = 50
}

TEST(PlanPruneTest, NeverARunningJobEvenOverTheBudget) {
  EXPECT_THAT(Doomed(Jobs(), 1), ElementsAre("a", "b", "c"));
}

TEST(PlanPruneTest, TiesGoToTheLargerJob) {
  std::vector<JobUsage> jobs = {{"small", 7, 5, false}, {"large", 7, 50, false}};
  EXPECT_THAT(Doomed(jobs, 10), ElementsAre("large"));
}

// Campaign row 5d: alice's one job, the oldest of all, and mallory's flood. Least recently seen
// first would take alice's job second; by share only mallory's go.
TEST(PlanPruneTest, OneUsersFloodDeletesOnlyThatUsersJobs) {
  constexpr uint32_t kAlice = 1000;
  constexpr uint32_t kMallory = 1001;
  const std::vector<JobUsage> jobs = {{"alice", 100, 10, false, kAlice},
                                      {"m-old", 50, 50, false, kMallory},
                                      {"m-new", 200, 60, false, kMallory},
                                      {"m-live", 300, 40, true, kMallory}};
  // 160 bytes over 100: shares of 50; mallory's 150 are over, alice's 10 are not.
  const PrunePlan plan = PlanPrune(jobs, BudgetPolicy{100}, kNow);
  EXPECT_THAT(plan.doomed, ElementsAre("m-old", "m-new"));
  EXPECT_THAT(plan.refused, IsEmpty());  // 50 bytes left: under the budget again
}

TEST(PlanPruneTest, TheUserFurthestOverItsShareFirstAndSharesAreTakenAgain) {
  const std::vector<JobUsage> jobs = {
      {"a1", 10, 30, false, 1}, {"a2", 20, 30, false, 1},  // user 1: 60
      {"b1", 5, 40, false, 2},  {"b2", 30, 50, false, 2},  // user 2: 90, the largest
      {"c1", 1, 20, false, 3},                             // user 3: 20
  };
  // 170 over 120 (shares of 40): user 2 (90) loses b1; then user 1 (60) is the furthest over
  // and loses a1: 100 left.
  EXPECT_THAT(Doomed(jobs, 120), ElementsAre("b1", "a1"));
  // Over 60 (shares of 20): b1, a1, then user 2 (50) loses b2: 50 left, two users holding
  // data (shares of 30); user 3's job, under its share all along, is never taken.
  EXPECT_THAT(Doomed(jobs, 60), ElementsAre("b1", "a1", "b2"));
}

TEST(PlanPruneTest, NeverAJobThatEndedWithinTheGracePeriod) {
  const std::vector<JobUsage> jobs = {{"old", kNow - 10 * kMinuteNs, 60, false, 7},
                                      {"just-ended", kNow - kMinuteNs / 2, 60, false, 7},
                                      {"other", kNow - 20 * kMinuteNs, 5, false, 8}};
  BudgetPolicy policy{50};
  policy.grace_ns = 5 * kMinuteNs;
  const PrunePlan plan = PlanPrune(jobs, policy, kNow);
  EXPECT_THAT(plan.doomed, ElementsAre("old"));
  // Still over, with only a job in its grace period left: its owner is refused until then.
  ASSERT_EQ(plan.refused.size(), 1u);
  ASSERT_TRUE(plan.refused.contains(7));
  EXPECT_THAT(plan.refused.at(7), HasSubstr("over its share"));
  policy.grace_ns = 0;
  EXPECT_THAT(PlanPrune(jobs, policy, kNow).doomed, ElementsAre("old", "just-ended"));
}

TEST(PlanPruneTest, AUserWhoseRunningJobAloneIsOverItsShareIsRefusedAndNobodyElsePruned) {
  const std::vector<JobUsage> jobs = {{"alice", 10, 30, false, 1}, {"flood", 20, 200, true, 2}};
  const PrunePlan plan = PlanPrune(jobs, BudgetPolicy{100}, kNow);
  EXPECT_THAT(plan.doomed, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1u);
  ASSERT_TRUE(plan.refused.contains(2));
  EXPECT_THAT(plan.refused.at(2), HasSubstr("over --max-disk"));
}

TEST(PlanPruneTest, AUserAloneIsNeverRefusedByTheBudget) {
  const PrunePlan plan = PlanPrune({{"live", 20, 200, true, 1}}, BudgetPolicy{100}, kNow);
  EXPECT_THAT(plan.doomed, IsEmpty());
  EXPECT_THAT(plan.refused, IsEmpty());
}

TEST(PlanPruneTest, AQuotaRefusesItsUserAndDeletesNothing) {
  const std::vector<JobUsage> jobs = {
      {"small", 10, 30, false, 1}, {"big1", 20, 40, false, 2}, {"big2", 30, 30, true, 2}};
  BudgetPolicy policy;
  policy.max_bytes_per_user = 70;
  const PrunePlan plan = PlanPrune(jobs, policy, kNow);
  EXPECT_THAT(plan.doomed, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1u);  // user 2 takes 70: at the quota
  EXPECT_THAT(plan.refused.at(2), HasSubstr("--max-disk-per-user"));
  policy.max_bytes_per_user = 71;
  EXPECT_THAT(PlanPrune(jobs, policy, kNow).refused, IsEmpty());
}

TEST(RefusedUsersTest, ARefusedUserIsToldWhyAsADiskFullRefusal) {
  RefusedUsers refused;
  EXPECT_TRUE(refused.empty());
  EXPECT_TRUE(refused.Check(5).ok());
  refused.Set({{5, "because"}});
  EXPECT_TRUE(refused.Check(6).ok());
  const absl::Status status = refused.Check(5);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "daemon disk full for uid 5: because");
  EXPECT_TRUE(IsDiskFull(status));
  refused.Set({});
  EXPECT_TRUE(refused.Check(5).ok());
}

TEST(JobBytesTest, SumsTheFilesOfTheDirectoryAndZeroWhenMissing) {
  fixtures::ScopedTempDir dir;
  std::ofstream(dir.File("rank-00000.sqlite")) << std::string(1000, 'x');
  std::ofstream(dir.File("rank-00000.sqlite-wal")) << std::string(24, 'y');
  absl::StatusOr<uint64_t> bytes = JobBytes(dir.path());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 1024u);
  EXPECT_EQ(*JobBytes(dir.File("no-such-job")), 0u);
}

TEST(ParseDiskSizeTest, UnitsArePowersOf1024) {
  EXPECT_EQ(*ParseDiskSize("4096"), 4096u);
  EXPECT_EQ(*ParseDiskSize("10B"), 10u);
  EXPECT_EQ(*ParseDiskSize("500M"), 500u << 20);
  EXPECT_EQ(*ParseDiskSize("20G"), uint64_t{20} << 30);
  EXPECT_EQ(*ParseDiskSize("20GiB"), uint64_t{20} << 30);
  EXPECT_EQ(*ParseDiskSize("20gb"), uint64_t{20} << 30);
  EXPECT_EQ(*ParseDiskSize("1.5T"), (uint64_t{3} << 40) / 2);
  EXPECT_EQ(*ParseDiskSize("64k"), 64u << 10);
}

TEST(ParseDiskSizeTest, BadValuesSayTheForm) {
  for (const char* bad : {"", "G", "20X", "20GG", "-5G", "0", "0.0001", "1.2.3G", "99999999T"}) {
    absl::StatusOr<uint64_t> size = ParseDiskSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(size.status().message()), HasSubstr("such as 20G")) << bad;
  }
}

}  // namespace
}  // namespace flopscope::daemon
