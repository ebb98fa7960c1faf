#include "injector/records/thread_buffer.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

namespace flopscope::injector {
namespace {

fs_range_event Event(uint64_t n) { return fs_range_event{1, n, 0, 7, 10, 20, 1, 0}; }

TEST(ThreadBufferTest, RecordsComeOutInOrderAndReleaseTheirBudget) {
  LossCounters losses;
  BufferRegistry registry(1 << 20, &losses);
  ThreadBuffer* buffer = registry.Register();
  for (uint64_t i = 1; i <= 300; ++i) ASSERT_TRUE(buffer->AppendRange(Event(i)));
  ASSERT_TRUE(buffer->AppendMetadata(MetadataRecord{"batch_size", "8", 5}));
  EXPECT_GT(registry.bytes_in_use(), 0u);
  RecordSet records;
  registry.DrainAll(&records);
  ASSERT_EQ(records.ranges.size(), 300u);
  EXPECT_EQ(records.ranges.front().instance_id, 1u);
  EXPECT_EQ(records.ranges.back().instance_id, 300u);
  ASSERT_EQ(records.metadata.size(), 1u);
  EXPECT_EQ(records.metadata[0].key, "batch_size");
  // The emptied chunk stays in the pool for reuse (and counted); the metadata is refunded.
  EXPECT_EQ(registry.bytes_in_use(), sizeof(RangeChunk));
  EXPECT_EQ(registry.AppendedTotal(), 301u);
}

TEST(ThreadBufferTest, AcceptedRecordsAreCountedInTheMadeCountsFileAndDropsAreNot) {
  char dir[] = "/tmp/thread-buffer-made-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/session.made";
  std::string error;
  std::unique_ptr<MadeCountsPage> made = MadeCountsPage::Create(path, &error);
  ASSERT_NE(made, nullptr) << error;
  LossCounters losses;
  BufferRegistry registry(2 * sizeof(RangeChunk), &losses);
  registry.SetMadeCounts(made.get());
  ThreadBuffer* buffer = registry.Register();
  constexpr uint64_t kAttempts = 3 * RangeChunk::kCapacity;
  for (uint64_t i = 0; i < kAttempts; ++i) buffer->AppendRange(Event(i));
  const uint64_t dropped = losses.Get(LossCause::kBufferFull);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(made->Total(), kAttempts - dropped);
  EXPECT_EQ(made->Total(), registry.AppendedTotal());
  // An exited thread's buffer is freed at the next drain; its count stays in the file.
  registry.Release(buffer);
  RecordSet records;
  registry.DrainAll(&records);
  ThreadBuffer* next = registry.Register();
  ASSERT_TRUE(next->AppendRange(Event(1)));
  EXPECT_EQ(made->Total(), kAttempts - dropped + 1);
  made->Remove();
  rmdir(dir);
}

TEST(ThreadBufferTest, TheMemoryBoundDropsAndCountsRecords) {
  LossCounters losses;
  constexpr uint64_t kBudget = 2 * sizeof(RangeChunk);
  BufferRegistry registry(kBudget, &losses);
  ThreadBuffer* buffer = registry.Register();
  uint64_t kept = 0;
  constexpr uint64_t kAttempts = 10000;
  for (uint64_t i = 0; i < kAttempts; ++i) kept += buffer->AppendRange(Event(i)) ? 1 : 0;
  EXPECT_LE(registry.bytes_in_use(), kBudget);
  EXPECT_EQ(kept, 2 * RangeChunk::kCapacity);
  EXPECT_EQ(losses.Get(LossCause::kBufferFull), kAttempts - kept);
  RecordSet records;
  registry.DrainAll(&records);
  EXPECT_EQ(records.ranges.size(), kept);
  // After the drain the pooled chunks take records again, within the same bound.
  EXPECT_TRUE(buffer->AppendRange(Event(1)));
  EXPECT_LE(registry.bytes_in_use(), kBudget);
}

TEST(ThreadBufferTest, BuffersShareOneBound) {
  LossCounters losses;
  BufferRegistry registry(sizeof(RangeChunk), &losses);  // room for one chunk in all
  ThreadBuffer* a = registry.Register();
  ThreadBuffer* b = registry.Register();
  uint64_t kept = 0;
  while (a->AppendRange(Event(1))) ++kept;
  EXPECT_EQ(kept, RangeChunk::kCapacity);
  EXPECT_FALSE(b->AppendRange(Event(2)));
  EXPECT_EQ(losses.Get(LossCause::kBufferFull), 2u);
  EXPECT_EQ(registry.bytes_in_use(), sizeof(RangeChunk));
}

TEST(ThreadBufferTest, KernelsUseTheirOwnChunks) {
  LossCounters losses;
  BufferRegistry registry(1 << 20, &losses);
  ThreadBuffer* buffer = registry.Register();
  fs_kernel kernel{};
  kernel.correlation_id = 5;
  for (size_t i = 0; i < KernelChunk::kCapacity + 1; ++i) ASSERT_TRUE(buffer->AppendKernel(kernel));
  RecordSet records;
  registry.DrainAll(&records);
  ASSERT_EQ(records.kernels.size(), KernelChunk::kCapacity + 1);
  EXPECT_EQ(records.kernels.back().correlation_id, 5u);
}

TEST(ThreadBufferTest, WakesTheExporterWhenABufferFillsUp) {
  LossCounters losses;
  BufferRegistry registry(64 << 20, &losses);
  int wakes = 0;
  registry.SetWakeCallback([](void* count) { ++*static_cast<int*>(count); }, &wakes);
  ThreadBuffer* buffer = registry.Register();
  for (size_t i = 0; i < BufferRegistry::kWakeThreshold - 1; ++i) buffer->AppendRange(Event(i));
  EXPECT_EQ(wakes, 0);
  buffer->AppendRange(Event(0));
  EXPECT_EQ(wakes, 1);
  RecordSet records;
  registry.DrainAll(&records);
  for (size_t i = 0; i < BufferRegistry::kWakeThreshold; ++i) buffer->AppendRange(Event(i));
  EXPECT_EQ(wakes, 2);
}

TEST(ThreadBufferTest, ASmallBudgetWakesTheExporterBeforeItIsFull) {
  LossCounters losses;
  const uint64_t budget = 4 * sizeof(RangeChunk);
  BufferRegistry registry(budget, &losses);
  EXPECT_LT(registry.wake_threshold(), BufferRegistry::kWakeThreshold);
  int wakes = 0;
  registry.SetWakeCallback([](void* count) { ++*static_cast<int*>(count); }, &wakes);
  ThreadBuffer* buffer = registry.Register();
  size_t appended = 0;
  while (wakes == 0 && buffer->AppendRange(Event(appended))) ++appended;
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(losses.Get(LossCause::kBufferFull), 0u);  // woken while there was room left
  EXPECT_LT(appended * sizeof(fs_range_event), budget / 2);
}

TEST(ThreadBufferTest, ReleasedBufferIsDrainedThenFreed) {
  LossCounters losses;
  BufferRegistry registry(1 << 20, &losses);
  std::thread([&] {
    ThreadBuffer* buffer = registry.Register();
    buffer->AppendRange(Event(9));
    registry.Release(buffer);
  }).join();
  RecordSet records;
  registry.DrainAll(&records);
  ASSERT_EQ(records.ranges.size(), 1u);
  EXPECT_EQ(records.ranges[0].instance_id, 9u);
  EXPECT_EQ(registry.AppendedTotal(), 1u);  // still counted after the buffer is gone
}

}  // namespace
}  // namespace flopscope::injector
