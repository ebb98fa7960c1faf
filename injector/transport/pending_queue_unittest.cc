#include "injector/transport/pending_queue.h"

#include <gtest/gtest.h>

namespace flopscope::transport {
namespace {

PendingBatch Batch(uint64_t seq, uint64_t bytes, uint64_t records = 1) {
  auto message = std::make_shared<v1::UpMessage>();
  message->mutable_batch()->set_seq(seq);
  return PendingBatch{seq, std::move(message), records, bytes, false};
}

TEST(PendingQueueTest, AcksDropAPrefix) {
  PendingQueue queue(1000);
  for (uint64_t seq = 1; seq <= 4; ++seq) queue.Push(Batch(seq, 10));
  EXPECT_EQ(queue.bytes(), 40u);
  EXPECT_EQ(queue.AckThrough(2), 2u);
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.bytes(), 20u);
  EXPECT_EQ(queue.AckThrough(2), 0u);  // repeated ack
  EXPECT_EQ(queue.AckThrough(10), 2u);
  EXPECT_TRUE(queue.empty());
}

TEST(PendingQueueTest, NextAfterWalksInSequenceOrder) {
  PendingQueue queue(1000);
  queue.Push(Batch(3, 1));
  queue.Push(Batch(5, 1));
  queue.Push(Batch(8, 1));
  ASSERT_NE(queue.NextAfter(0), nullptr);
  EXPECT_EQ(queue.NextAfter(0)->seq, 3u);
  EXPECT_EQ(queue.NextAfter(3)->seq, 5u);
  EXPECT_EQ(queue.NextAfter(6)->seq, 8u);
  EXPECT_EQ(queue.NextAfter(8), nullptr);
}

TEST(PendingQueueTest, RemoveAndReplaceKeepTheByteCount) {
  PendingQueue queue(1000);
  queue.Push(Batch(1, 10, 4));
  queue.Push(Batch(2, 20, 6));
  const auto removed = queue.Remove(2);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->records, 6u);
  EXPECT_FALSE(queue.Remove(2).has_value());
  EXPECT_EQ(queue.bytes(), 10u);
  EXPECT_TRUE(queue.Replace(Batch(1, 3, 0)));
  EXPECT_EQ(queue.bytes(), 3u);
  EXPECT_EQ(queue.Find(1)->records, 0u);
  EXPECT_FALSE(queue.Replace(Batch(9, 1)));
}

TEST(PendingQueueTest, RoomIsBoundedButAnEmptyQueueTakesAnything) {
  PendingQueue queue(100);
  EXPECT_TRUE(queue.HasRoomFor(1000));
  queue.Push(Batch(1, 60));
  EXPECT_TRUE(queue.HasRoomFor(40));
  EXPECT_FALSE(queue.HasRoomFor(41));
}

}  // namespace
}  // namespace flopscope::transport
