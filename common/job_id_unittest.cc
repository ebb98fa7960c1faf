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

TEST(JobIdTest, ApartIdsNameTheirOwner) {
  EXPECT_EQ(ApartJobId("4242", "alice"), "4242@alice");
  EXPECT_EQ(JobIdProblem("4242@alice"), "");
  EXPECT_EQ(OwnerTagOf("4242@alice"), "alice");
  EXPECT_EQ(OwnerTagOf("4242"), "");
  const std::string longest = ApartJobId(std::string(kMaxJobIdLength, 'j'), "alice");
  EXPECT_EQ(longest.size(), kMaxJobIdLength);
  EXPECT_EQ(JobIdProblem(longest), "");
  for (const char* bad : {"@alice", "4242@", "a@b@c", "4242@.x", "42/2@alice", "42@a/b"}) {
    EXPECT_NE(JobIdProblem(bad), "") << bad;
  }
}

TEST(JobIdTest, OwnerTagIsTheNameWhenItFits) {
  EXPECT_EQ(OwnerTag("alice", 1001), "alice");
  EXPECT_EQ(OwnerTag("", 1001), "uid1001");
  EXPECT_EQ(OwnerTag("j\xc3\xa9r\xc3\xb4me", 1002), "uid1002");
  EXPECT_EQ(OwnerTag(std::string(33, 'a'), 7), "uid7");
}

}  // namespace
}  // namespace flopscope
