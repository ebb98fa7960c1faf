#include "daemon/query/ordered_reads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

// A snapshot that says which index it was read for; odd indexes fail.
absl::StatusOr<RankSnapshot> Snapshot(size_t index) {
  if (index % 2 == 1) return absl::DataLossError(absl::StrCat("rank ", index));
  RankSnapshot snapshot;
  snapshot.metadata.emplace_back().set_key(absl::StrCat(index));
  return snapshot;
}

TEST(ReadInOrderTest, ResultsComeInIndexOrderWhateverOrderTheReadsFinish) {
  constexpr size_t kCount = 40;
  std::vector<size_t> consumed;
  ReadInOrder(
      kCount, 4, 6,
      [](size_t index) {
        // Later indexes often finish first.
        std::this_thread::sleep_for(std::chrono::microseconds((kCount - index) % 7 * 300));
        return Snapshot(index);
      },
      [&](size_t index, absl::StatusOr<RankSnapshot> snapshot) {
        consumed.push_back(index);
        if (index % 2 == 1) {
          EXPECT_EQ(snapshot.status().message(), absl::StrCat("rank ", index));
        } else {
          EXPECT_TRUE(snapshot.ok());
          EXPECT_EQ(snapshot->metadata.at(0).key(), absl::StrCat(index));
        }
        return true;
      });
  ASSERT_EQ(consumed.size(), kCount);
  for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(consumed[i], i);
}

TEST(ReadInOrderTest, NeverReadsMoreThanAheadOfTheConsumer) {
  constexpr size_t kAhead = 5;
  std::atomic<size_t> started{0};
  std::atomic<size_t> done{0};
  std::atomic<size_t> most_ahead{0};
  ReadInOrder(
      100, 3, kAhead,
      [&](size_t index) {
        const size_t ahead = ++started - done.load();
        size_t seen = most_ahead.load();
        while (ahead > seen && !most_ahead.compare_exchange_weak(seen, ahead)) {
        }
        return Snapshot(index);
      },
      [&](size_t, absl::StatusOr<RankSnapshot>) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow consumer
        ++done;
        return true;
      });
  EXPECT_EQ(started.load(), 100u);
  // `ahead` results beyond the one the consumer is working on.
  EXPECT_LE(most_ahead.load(), kAhead + 1);
}

TEST(ReadInOrderTest, AConsumerThatStopsStopsTheReads) {
  std::atomic<size_t> reads{0};
  size_t consumed = 0;
  ReadInOrder(
      1000, 2, 4,
      [&](size_t index) {
        ++reads;
        return Snapshot(index);
      },
      [&](size_t index, absl::StatusOr<RankSnapshot>) {
        ++consumed;
        return index < 3;
      });
  EXPECT_EQ(consumed, 4u);
  EXPECT_LE(reads.load(), 4u + 4u);  // the four consumed and at most `ahead` beyond them
}

TEST(ReadInOrderTest, OneThreadReadsOnTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  size_t consumed = 0;
  ReadInOrder(
      3, 1, 4,
      [&](size_t index) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        return Snapshot(index);
      },
      [&](size_t, absl::StatusOr<RankSnapshot>) { return ++consumed < 10; });
  EXPECT_EQ(consumed, 3u);
  EXPECT_GE(ReportReadThreads(), 4u);
  EXPECT_LE(ReportReadThreads(), 8u);
}

}  // namespace
}  // namespace flopscope::daemon
