#include "injector/cupti/launch_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace flopscope::injector::cupti {
namespace {

TEST(LaunchRingTest, FindsWhatWasRecorded) {
  LaunchRing ring(16);
  ring.Record(5, RangeContext{11, 101});
  RangeContext found;
  ASSERT_EQ(ring.Find(5, &found), LaunchRing::Outcome::kFound);
  EXPECT_EQ(found.path_id, 11u);
  EXPECT_EQ(found.instance_id, 101u);
  // Slots are not cleared by a read: all the kernels of one graph launch share its id.
  ASSERT_EQ(ring.Find(5, &found), LaunchRing::Outcome::kFound);
}

TEST(LaunchRingTest, TheCountedBitTravelsApartFromTheInstance) {
  LaunchRing ring(16);
  ring.Record(7, RangeContext{3, 0x7fffffffffffffffull}, /*counted=*/true);
  ring.Record(8, RangeContext{4, 42});
  RangeContext found;
  bool counted = false;
  ASSERT_EQ(ring.Find(7, &found, &counted), LaunchRing::Outcome::kFound);
  EXPECT_TRUE(counted);
  EXPECT_EQ(found.instance_id, 0x7fffffffffffffffull);  // the largest instance, intact
  ASSERT_EQ(ring.Find(8, &found, &counted), LaunchRing::Outcome::kFound);
  EXPECT_FALSE(counted);
  EXPECT_EQ(found.instance_id, 42u);
}

TEST(LaunchRingTest, AnIdNotRecordedYetIsNotYet) {
  LaunchRing ring(16);
  RangeContext found;
  EXPECT_EQ(ring.Find(3, &found), LaunchRing::Outcome::kNotYet);
  ring.Record(3, RangeContext{1, 1});
  EXPECT_EQ(ring.Find(19, &found), LaunchRing::Outcome::kNotYet);  // same slot, later id
}

TEST(LaunchRingTest, AReusedSlotReportsTheOldIdAsOverwritten) {
  LaunchRing ring(16);
  ring.Record(3, RangeContext{1, 1});
  ring.Record(19, RangeContext{2, 2});  // 19 = 3 + 16: the same slot
  RangeContext found;
  EXPECT_EQ(ring.Find(3, &found), LaunchRing::Outcome::kOverwritten);
  ASSERT_EQ(ring.Find(19, &found), LaunchRing::Outcome::kFound);
  EXPECT_EQ(found.path_id, 2u);
}

TEST(LaunchRingTest, RoundsItsSizeUpToAPowerOfTwo) {
  EXPECT_EQ(LaunchRing(1000).slots(), 1024u);
  EXPECT_EQ(LaunchRing(1).slots(), 1u);
}

TEST(LaunchRingTest, CorrelationIdsThatWrapAroundStillCompareInOrder) {
  LaunchRing ring(4);
  const uint32_t before_wrap = 0xFFFFFFFEu;
  ring.Record(before_wrap, RangeContext{7, 7});
  RangeContext found;
  ASSERT_EQ(ring.Find(before_wrap, &found), LaunchRing::Outcome::kFound);
  ring.Record(before_wrap + 4, RangeContext{8, 8});  // wraps to 2, same slot
  EXPECT_EQ(ring.Find(before_wrap, &found), LaunchRing::Outcome::kOverwritten);
  ASSERT_EQ(ring.Find(before_wrap + 4, &found), LaunchRing::Outcome::kFound);
  EXPECT_EQ(found.path_id, 8u);
}

// Launching threads record while a buffer thread reads: every found context is the one its id
// was recorded with (never a torn mix of two writes).
TEST(LaunchRingTest, ConcurrentWritersAndAReaderNeverSeeTornSlots) {
  LaunchRing ring(64);
  constexpr int kThreads = 4;
  constexpr uint32_t kPerThread = 20000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> mismatches{0};
  std::thread reader([&] {
    uint32_t probe = 1;
    while (!done.load()) {
      RangeContext context;
      if (ring.Find(probe, &context) == LaunchRing::Outcome::kFound) {
        if (context.path_id != probe || context.instance_id != uint64_t{probe} * 3) {
          mismatches.fetch_add(1);
        }
      }
      probe = probe % (kThreads * kPerThread) + 1;
    }
  });
  std::vector<std::thread> writers;
  std::atomic<uint32_t> next_id{1};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&] {
      for (uint32_t i = 0; i < kPerThread; ++i) {
        const uint32_t id = next_id.fetch_add(1);
        ring.Record(id, RangeContext{id, uint64_t{id} * 3});
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(mismatches.load(), 0u);
  // Every slot now holds one of the recorded ids with its own context.
  for (uint32_t slot = 0; slot < 64; ++slot) {
    uint32_t hits = 0;
    for (uint32_t id = slot == 0 ? 64 : slot; id <= kThreads * kPerThread; id += 64) {
      RangeContext context;
      if (ring.Find(id, &context) == LaunchRing::Outcome::kFound) {
        ++hits;
        EXPECT_EQ(context.path_id, id);
      }
    }
    EXPECT_EQ(hits, 1u) << "slot " << slot;
  }
}

}  // namespace
}  // namespace flopscope::injector::cupti
