// The streams an open-file limit affords, and raising the soft limit to the hard one.
#include "daemon/server/open_file_limit.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace flopscope::daemon {
namespace {

TEST(OpenFileLimitTest, HalfTheFilesAtFourAStreamWithinBounds) {
  EXPECT_EQ(StreamsForOpenFiles(262144), 32768);  // the aggregator's systemd unit: 16 384 ranks fit
  EXPECT_EQ(StreamsForOpenFiles(65536), 8192);    // a node daemon's unit
  EXPECT_EQ(StreamsForOpenFiles(1024), 128);      // a shell's usual soft limit, if it stays
  EXPECT_EQ(StreamsForOpenFiles(64), kFewestStreams);
  EXPECT_EQ(StreamsForOpenFiles(RLIM_INFINITY), kMostStreams);
}

TEST(OpenFileLimitTest, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit lowered = before;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const rlim_t raised = RaiseOpenFileLimit();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(raised, after.rlim_cur);
  EXPECT_GT(after.rlim_cur, rlim_t{256});
  const rlim_t most = static_cast<rlim_t>(kMostStreams) * kDescriptorsPerStream * 2;
  EXPECT_EQ(after.rlim_cur,
            before.rlim_max == RLIM_INFINITY ? most : std::min(before.rlim_max, most));
  EXPECT_EQ(DefaultMaxStreams(), StreamsForOpenFiles(after.rlim_cur));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
}  // namespace flopscope::daemon
