// The disk-space reserve and how a full disk is told to producers.

#include "daemon/store/disk_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::StartsWith;

TEST(DiskSpaceTest, ReserveIsFivePercentWithinBounds) {
  EXPECT_EQ(DiskSpaceGuard::ReserveFor(uint64_t{2} << 20), (uint64_t{2} << 20) / 20);
  EXPECT_EQ(DiskSpaceGuard::ReserveFor(1000), uint64_t{64} << 10);               // tiny: the floor
  EXPECT_EQ(DiskSpaceGuard::ReserveFor(uint64_t{1} << 40), uint64_t{64} << 20);  // huge: cap
}

TEST(DiskSpaceTest, AnOrdinaryDirectoryHasRoomAndAMissingOneIsNotRefused) {
  fixtures::ScopedTempDir dir;
  EXPECT_TRUE(DiskSpaceGuard(dir.path()).Check().ok());  // the test machine is not full
  EXPECT_TRUE(DiskSpaceGuard(dir.File("missing")).Check().ok());
}

TEST(DiskSpaceTest, SqliteFullBecomesARefusalThatNamesTheReason) {
  const absl::Status sqlite =
      absl::ResourceExhaustedError("sqlite: database or disk is full (in: COMMIT)");
  ASSERT_TRUE(IsDiskFull(sqlite));
  const absl::Status refusal = DiskFullRefusal(sqlite);
  EXPECT_TRUE(absl::IsResourceExhausted(refusal));
  EXPECT_THAT(std::string(refusal.message()),
              StartsWith("daemon disk full: sqlite: database or disk is full"));
  // Already phrased as a refusal: not prefixed twice.
  EXPECT_EQ(DiskFullRefusal(refusal), refusal);
  // An exec() error from SQLite comes as INTERNAL with the same text.
  EXPECT_TRUE(IsDiskFull(absl::InternalError("sqlite: x: database or disk is full")));
  EXPECT_FALSE(IsDiskFull(absl::InternalError("sqlite: disk I/O error")));
}

}  // namespace
}  // namespace flopscope::daemon
