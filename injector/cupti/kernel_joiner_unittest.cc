#include "injector/cupti/kernel_joiner.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace flopscope::injector::cupti {
namespace {

KernelRecord Kernel(uint32_t correlation_id, uint32_t device = 0, uint32_t context = 1) {
  KernelRecord record;
  record.correlation_id = correlation_id;
  record.device_id = device;
  record.context_id = context;
  record.start_ns = 100;
  record.end_ns = 200;
  record.name_id = 1;
  return record;
}

KernelRecord GraphKernel(uint32_t correlation_id, uint64_t graph_node_id) {
  KernelRecord record = Kernel(correlation_id);
  record.graph_id = 3;
  record.graph_node_id = graph_node_id;
  return record;
}

class KernelJoinerTest : public ::testing::Test {
 protected:
  std::vector<KernelRecord> Join(std::vector<KernelRecord> records) {
    std::vector<KernelRecord> out;
    joiner_.Join(&records, &out);
    return out;
  }
  std::vector<KernelRecord> Age(bool final = false) {
    std::vector<KernelRecord> out;
    joiner_.Age(final, &out);
    return out;
  }

  LaunchRing ring_{64};
  GraphNodeTable nodes_;
  KernelJoiner joiner_{&ring_, &nodes_};
};

TEST_F(KernelJoinerTest, LaunchSeenFirst) {
  ring_.Record(1, RangeContext{10, 100});
  const std::vector<KernelRecord> out = Join({Kernel(1)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path_id, 10u);
  EXPECT_EQ(out[0].range_instance_id, 100u);
  EXPECT_EQ(joiner_.counters().by_launch, 1u);
  EXPECT_EQ(joiner_.pending(), 0u);
}

TEST_F(KernelJoinerTest, KernelSeenFirstWaitsForItsLaunch) {
  EXPECT_TRUE(Join({Kernel(2)}).empty());
  EXPECT_EQ(joiner_.pending(), 1u);
  ring_.Record(2, RangeContext{20, 200});
  const std::vector<KernelRecord> out = Age();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path_id, 20u);
  EXPECT_EQ(out[0].range_instance_id, 200u);
  EXPECT_EQ(joiner_.counters().waited, 1u);
  EXPECT_EQ(joiner_.counters().launch_not_seen, 0u);
}

TEST_F(KernelJoinerTest, AWaitingKernelIsJoinedByTheNextBufferToo) {
  EXPECT_TRUE(Join({Kernel(3)}).empty());
  ring_.Record(3, RangeContext{30, 300});
  ring_.Record(4, RangeContext{40, 400});
  const std::vector<KernelRecord> out = Join({Kernel(4)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].correlation_id, 3u);
  EXPECT_EQ(out[0].path_id, 30u);
  EXPECT_EQ(out[1].path_id, 40u);
}

TEST_F(KernelJoinerTest, AKernelWhoseLaunchNeverComesGoesToTheRootAndIsCounted) {
  EXPECT_TRUE(Join({Kernel(5)}).empty());
  EXPECT_TRUE(Age().empty());  // one pass: still waiting
  const std::vector<KernelRecord> out = Age();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path_id, 0u);
  EXPECT_EQ(out[0].range_instance_id, 0u);
  EXPECT_EQ(out[0].correlation_id, 5u);  // kept, not dropped
  EXPECT_EQ(joiner_.counters().launch_not_seen, 1u);
}

TEST_F(KernelJoinerTest, TheFinalPassReleasesEverything) {
  EXPECT_TRUE(Join({Kernel(6), Kernel(7)}).empty());
  ring_.Record(7, RangeContext{70, 700});
  const std::vector<KernelRecord> out = Age(/*final=*/true);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].path_id, 70u);  // joined by the retry
  EXPECT_EQ(out[1].path_id, 0u);
  EXPECT_EQ(joiner_.pending(), 0u);
  EXPECT_EQ(joiner_.counters().launch_not_seen, 1u);
}

TEST_F(KernelJoinerTest, AKernelWhoseSlotWasReusedIsUnattributedAtOnce) {
  ring_.Record(8, RangeContext{80, 800});
  ring_.Record(8 + 64, RangeContext{81, 801});
  const std::vector<KernelRecord> out = Join({Kernel(8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path_id, 0u);
  EXPECT_EQ(joiner_.counters().launch_not_seen, 1u);
}

TEST_F(KernelJoinerTest, GraphKernelsBelongToTheRangeThatCapturedTheirNode) {
  nodes_.NodeCreated(501, RangeContext{50, 5000});  // captured inside `Model/attn`
  ring_.Record(9, RangeContext{60, 6000});          // the graph launched inside `Model/step`
  const std::vector<KernelRecord> out = Join({GraphKernel(9, 501), GraphKernel(9, 502)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].path_id, 50u);
  // The capture-time occurrence closed long ago: its span must not stretch over replays.
  EXPECT_EQ(out[0].range_instance_id, 0u);
  // A node captured with no range open falls back to the graph launch's range.
  EXPECT_EQ(out[1].path_id, 60u);
  EXPECT_EQ(out[1].range_instance_id, 6000u);
  EXPECT_EQ(joiner_.counters().by_graph_node, 1u);
  EXPECT_EQ(joiner_.counters().by_launch, 1u);
}

TEST_F(KernelJoinerTest, KernelsCarryTheCountedFlagOfTheirLaunch) {
  ring_.Record(1, RangeContext{10, 100}, /*counted=*/true);
  ring_.Record(2, RangeContext{10, 100});
  ring_.Record(3, RangeContext{10, 100}, /*counted=*/true);  // a graph launch in a window
  nodes_.NodeCreated(77, RangeContext{20, 200});
  const std::vector<KernelRecord> out = Join({Kernel(1), Kernel(2), GraphKernel(3, 77)});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].counted);
  EXPECT_FALSE(out[1].counted);
  EXPECT_TRUE(out[2].counted);                // replayed inside the window
  EXPECT_EQ(out[2].path_id, 20u);             // still attributed to its node's capture range
  EXPECT_EQ(out[0].range_instance_id, 100u);  // the flag is not part of the instance
}

TEST_F(KernelJoinerTest, EveryKernelOfOneGraphLaunchFindsTheLaunch) {
  ring_.Record(10, RangeContext{11, 111});
  std::vector<KernelRecord> replay;
  for (uint64_t node = 1; node <= 5; ++node) replay.push_back(GraphKernel(10, 9000 + node));
  const std::vector<KernelRecord> out = Join(replay);
  ASSERT_EQ(out.size(), 5u);
  for (const KernelRecord& record : out) EXPECT_EQ(record.path_id, 11u);
}

TEST_F(KernelJoinerTest, DevicesAndContextsDoNotMatterToTheJoin) {
  ring_.Record(12, RangeContext{1, 1});
  ring_.Record(13, RangeContext{2, 2});
  const std::vector<KernelRecord> out =
      Join({Kernel(13, /*device=*/1, /*context=*/5), Kernel(12, /*device=*/0, /*context=*/1)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].path_id, 2u);
  EXPECT_EQ(out[0].device_id, 1u);
  EXPECT_EQ(out[1].path_id, 1u);
  EXPECT_EQ(out[1].device_id, 0u);
}

TEST_F(KernelJoinerTest, LaunchesRecordedFromManyThreadsJoinTheirOwnRanges) {
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (uint32_t i = 0; i < 10; ++i) {
        const uint32_t id = 1 + t * 10 + i;
        ring_.Record(id, RangeContext{100 + t, id});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<KernelRecord> records;
  for (uint32_t id = 40; id >= 1; --id) records.push_back(Kernel(id));  // any order
  const std::vector<KernelRecord> out = Join(records);
  ASSERT_EQ(out.size(), 40u);
  for (const KernelRecord& record : out) {
    EXPECT_EQ(record.path_id, 100 + (record.correlation_id - 1) / 10);
    EXPECT_EQ(record.range_instance_id, record.correlation_id);
  }
}

TEST(KernelJoinerLimitsTest, TooManyWaitingReleasesTheOldest) {
  LaunchRing ring(64);
  GraphNodeTable nodes;
  KernelJoiner joiner(&ring, &nodes, KernelJoiner::Options{.max_pending = 2, .max_age = 5});
  std::vector<KernelRecord> in = {Kernel(1), Kernel(2), Kernel(3)};
  std::vector<KernelRecord> out;
  joiner.Join(&in, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].correlation_id, 1u);
  EXPECT_EQ(out[0].path_id, 0u);
  EXPECT_EQ(joiner.pending(), 2u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
