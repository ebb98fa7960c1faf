#include "common/job_id.h"

#include <gtest/gtest.h>

namespace flopscope {
namespace {

TEST(JobIdTest, AcceptsSchedulerStyleIds) {
  EXPECT_EQ(JobIdProblem("12345"), "");
  EXPECT_EQ(JobIdProblem("bert-large_run.3"), "");
}

TEST(JobIdTest, RejectsPathTricksAndEmpty) {
  EXPECT_NE(JobIdProblem(""), "");
  EXPECT_NE(JobIdProblem(".."), "");
  EXPECT_NE(JobIdProblem("a/b"), "");
  EXPECT_NE(JobIdProblem("-rf"), "");
  EXPECT_NE(JobIdProblem(std::string(129, 'a')), "");
  EXPECT_NE(JobIdProblem(std::string("a\0b", 3)), "");
}

TEST(JobIdTest, SanitizedIdsAreValid) {
  for (const char* raw : {"a/b", "../x", "", "-x", "job id with spaces", "ü"}) {
    EXPECT_EQ(JobIdProblem(SanitizeJobId(raw)), "") << raw;
  }
  EXPECT_EQ(SanitizeJobId("slurm.42"), "slurm.42");
}

}  // namespace
}  // namespace flopscope
