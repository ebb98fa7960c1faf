// The disk budget's choice of jobs (disk_budget.h): oldest first, never a running job, only as
// many as needed; and the bytes of a job's directory.
#include "daemon/retention/disk_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<JobUsage> Jobs() {
  // Seen at 300, 100, 200 (a running one at 50): 10 + 20 + 30 + 40 = 100 bytes.
  return {
      {"c", 300, 10, false}, {"a", 100, 20, false}, {"b", 200, 30, false}, {"live", 50, 40, true}};
}

TEST(PlanPruneTest, NothingWhenUnderTheBudget) { EXPECT_THAT(PlanPrune(Jobs(), 100), IsEmpty()); }

TEST(PlanPruneTest, OldestFinishedJobsFirstAndOnlyAsManyAsNeeded) {
  EXPECT_THAT(PlanPrune(Jobs(), 99), ElementsAre("a"));       // 100 - 20 = 80
  EXPECT_THAT(PlanPrune(Jobs(), 79), ElementsAre("a", "b"));  // 80 - 30 = 50
}

TEST(PlanPruneTest, NeverARunningJobEvenOverTheBudget) {
  EXPECT_THAT(PlanPrune(Jobs(), 0), ElementsAre("a", "b", "c"));
}

TEST(PlanPruneTest, TiesGoToTheLargerJob) {
  std::vector<JobUsage> jobs = {{"small", 7, 5, false}, {"large", 7, 50, false}};
  EXPECT_THAT(PlanPrune(jobs, 10), ElementsAre("large"));
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
