#include "injector/cupti/trace_outbox.h"

#include <gtest/gtest.h>

namespace flopscope::injector::cupti {
namespace {

TraceOutbox::Batch Records(size_t count, uint64_t first_id) {
  TraceOutbox::Batch batch(count);
  for (size_t i = 0; i < count; ++i) batch[i].correlation_id = first_id + i;
  return batch;
}

TEST(TraceOutboxTest, HandsOverBatchesAndMetadataInOrder) {
  TraceOutbox outbox;
  std::vector<MetadataPair> metadata = {{"gpu.0.name", "H100"}};
  EXPECT_FALSE(outbox.Add(Records(3, 1), &metadata));
  EXPECT_TRUE(metadata.empty());
  outbox.Add(Records(2, 10), &metadata);
  TraceOutbox::Contents contents;
  outbox.Take(&contents);
  ASSERT_EQ(contents.batches.size(), 2u);
  EXPECT_EQ(contents.batches[0].size(), 3u);
  EXPECT_EQ(contents.batches[1][1].correlation_id, 11u);
  ASSERT_EQ(contents.metadata.size(), 1u);
  EXPECT_EQ(contents.metadata[0].second, "H100");
  TraceOutbox::Contents again;
  outbox.Take(&again);
  EXPECT_TRUE(again.batches.empty());
}

TEST(TraceOutboxTest, RefusesBeyondItsLimitAndCounts) {
  TraceOutbox outbox(/*max_records=*/4);
  std::vector<MetadataPair> none;
  outbox.Add(Records(3, 1), &none);
  outbox.Add(Records(3, 4), &none);
  TraceOutbox::Contents contents;
  outbox.Take(&contents);
  ASSERT_EQ(contents.batches.size(), 2u);
  EXPECT_EQ(contents.batches[1].size(), 1u);
  EXPECT_EQ(contents.overflow, 2u);
}

TEST(TraceOutboxTest, AsksForAnEarlyCycleWhenRecordsPileUp) {
  TraceOutbox outbox;
  std::vector<MetadataPair> none;
  EXPECT_TRUE(outbox.Add(Records(TraceOutbox::kWakeThreshold, 1), &none));
}

TEST(TraceOutboxTest, SparesKeepTheirRoom) {
  TraceOutbox outbox;
  TraceOutbox::Batch used = Records(100, 1);
  const size_t capacity = used.capacity();
  outbox.ReturnSpare(std::move(used));
  TraceOutbox::Batch spare = outbox.TakeSpare();
  EXPECT_TRUE(spare.empty());
  EXPECT_EQ(spare.capacity(), capacity);
  EXPECT_EQ(outbox.TakeSpare().capacity(), 0u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
