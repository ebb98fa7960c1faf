#include "injector/transport/pending_queue.h"

#include <gtest/gtest.h>

namespace flopscope::transport {
namespace {

PendingBatch Batch(uint64_t seq, uint64_t bytes, uint64_t records = 1) {
  auto message = std::make_shared<v1::UpMessage>();
  message->mutable_batch()->set_seq(seq);
  PendingBatch batch;
  batch.seq = seq;
  batch.message = std::move(message);
  batch.records = records;
  batch.bytes = bytes;
  return batch;
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

TEST(PendingQueueTest, SpoolingMovesBatchesOutOfMemoryAndKeepsTheirRecords) {
  PendingQueue queue(1000);
  queue.Push(Batch(1, 10, 4));
  queue.Push(Batch(2, 20, 6));
  queue.Push(Batch(3, 30, 1));
  queue.Push(Batch(4, 40, 2));
  uint64_t next_offset = 0;
  // No room for the third: it stays in memory, and the fourth (written ahead, say) still goes.
  queue.SpoolInMemory([&next_offset](const PendingBatch& batch, SpoolFile::Entry* entry) {
    if (batch.seq == 3) return false;
    *entry = SpoolFile::Entry{batch.seq, next_offset++, 1, batch.records};
    return true;
  });
  EXPECT_TRUE(queue.Find(4)->in_spool);
  EXPECT_TRUE(queue.Find(4)->logged);
  EXPECT_TRUE(queue.Remove(4).has_value());
  EXPECT_EQ(queue.records(), 11u);
  EXPECT_EQ(queue.spooled_records(), 10u);
  EXPECT_EQ(queue.bytes(), 30u);
  EXPECT_EQ(queue.Find(1)->message, nullptr);
  EXPECT_EQ(queue.Find(2)->spooled.offset, 1u);
  EXPECT_NE(queue.Find(3)->message, nullptr);
  EXPECT_EQ(queue.AckThrough(1), 1u);
  EXPECT_EQ(queue.spooled_records(), 6u);
  EXPECT_EQ(queue.records(), 7u);
  EXPECT_TRUE(queue.Remove(2).has_value());
  EXPECT_EQ(queue.spooled_records(), 0u);
  EXPECT_EQ(queue.records(), 1u);
}

}  // namespace
}  // namespace flopscope::transport
