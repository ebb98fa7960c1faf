#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/made_counts_page.h"
#include "common/mutex.h"
#include "injector/records/counter_records.h"
#include "injector/records/loss_counters.h"
#include "injector/records/record_chunks.h"
#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

class BufferRegistry;

using RangeChunk = RecordChunk<fs_range_event, 2048>;  // 112 KiB
using KernelChunk = RecordChunk<fs_kernel, 512>;

// A flopscope-domain mark turned into a key/value (flopscope.v1.Metadata).
struct MetadataRecord {
  std::string key;
  std::string value;
  int64_t time_ns = 0;
};

// Records taken out of the buffers, ranges and kernels in the ABI's own layouts (no conversion
// on the hot path); counter records own their strings.
struct RecordSet {
  std::vector<fs_range_event> ranges;
  std::vector<fs_kernel> kernels;
  std::vector<MetadataRecord> metadata;
  std::vector<KernelFlopsRecord> kernel_flops;
  std::vector<CounterWindowRecord> windows;

  size_t size() const {
    return ranges.size() + kernels.size() + metadata.size() + kernel_flops.size() + windows.size();
  }
};

// The records one thread produced that the exporter has not taken yet. Only its owner thread
// appends; the exporter drains it and frees it after the owner exited.
class ThreadBuffer {
 public:
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Each returns false when the session's memory bound is reached: the record is dropped and
  // counted as BUFFER_FULL.
  bool AppendRange(const fs_range_event& event);
  bool AppendKernel(const fs_kernel& kernel);
  // Kernel records arrive from the tracer in batches: one lock for all. Returns how many fitted.
  size_t AppendKernels(const fs_kernel* kernels, size_t count);
  bool AppendMetadata(MetadataRecord record);
  // Counted FLOPs and counter windows (the exporter thread, when a window's data is decoded).
  // Returns how many of the records fitted; the rest are counted as BUFFER_FULL.
  size_t AppendKernelFlops(std::vector<KernelFlopsRecord>* records);
  bool AppendWindow(CounterWindowRecord record);

 private:
  friend class BufferRegistry;

  using RangeChunk = RecordChunk<fs_range_event, 2048>;  // 112 KiB
  using KernelChunk = RecordChunk<fs_kernel, 512>;

  explicit ThreadBuffer(BufferRegistry* registry) : registry_(registry) {}

  template <typename Chunk, typename T>
  bool AppendLocked(std::vector<Chunk*>* chunks, ChunkPool<Chunk>* pool, const T& record)
      FS_REQUIRES(mutex_);
  // Appends an owned record charged by its Bytes() to the budget (owned_bytes_).
  template <typename T>
  bool AppendOwnedLocked(std::vector<T>* records, T record, uint64_t bytes) FS_REQUIRES(mutex_);
  void AfterAppendLocked() FS_REQUIRES(mutex_);

  BufferRegistry* const registry_;
  // A per-buffer mutex shared only by the owner thread and the exporter: uncontended (the normal
  // case) it costs two atomic instructions (~20 ns), and it keeps drain-while-append simple.
  Mutex mutex_;
  std::vector<RangeChunk*> ranges_ FS_GUARDED_BY(mutex_);  // the last one is being filled
  std::vector<KernelChunk*> kernels_ FS_GUARDED_BY(mutex_);
  std::vector<MetadataRecord> metadata_ FS_GUARDED_BY(mutex_);
  std::vector<KernelFlopsRecord> kernel_flops_ FS_GUARDED_BY(mutex_);
  std::vector<CounterWindowRecord> windows_ FS_GUARDED_BY(mutex_);
  // What metadata_, kernel_flops_ and windows_ hold of the budget.
  uint64_t owned_bytes_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t appended_total_ FS_GUARDED_BY(mutex_) = 0;  // for statistics only
  size_t waiting_ FS_GUARDED_BY(mutex_) = 0;           // records appended since the last drain
  bool orphaned_ FS_GUARDED_BY(mutex_) = false;        // the owner thread has exited
  // Counts every record accepted into the made-counts file (one slot per buffer).
  MadeCountsPage::Counter made_ FS_GUARDED_BY(mutex_);
};

// All thread buffers of the session and the memory bound they share (FLOPSCOPE_BUFFER_MB).
class BufferRegistry {
 public:
  // After this many records wait in one buffer, the exporter is woken early; fewer when a quarter
  // of the budget holds fewer range records (wake_threshold()), or a small budget would fill up
  // between two flush intervals without the exporter ever being woken.
  static constexpr size_t kWakeThreshold = 8192;

  BufferRegistry(uint64_t budget_bytes, LossCounters* losses);
  BufferRegistry(const BufferRegistry&) = delete;
  BufferRegistry& operator=(const BufferRegistry&) = delete;

  // A new buffer for the calling thread; owned by the registry.
  ThreadBuffer* Register();
  // The owner thread exits: its records stay until the next drain, then the buffer is freed.
  void Release(ThreadBuffer* buffer);

  // Moves every buffered record into *out (appending); emptied chunks go back to the pool.
  void DrainAll(RecordSet* out);

  // Called (from an application thread) when a buffer crosses kWakeThreshold. Set once, before
  // any buffer exists.
  void SetWakeCallback(void (*wake)(void*), void* context) {
    wake_ = wake;
    wake_context_ = context;
  }
  // Where every accepted record is counted, so that what a SIGKILL leaves in the buffers can be
  // told after the process is gone (common/made_counts_page.h). Set once, before any buffer
  // exists; may stay null (no counting).
  void SetMadeCounts(MadeCountsPage* made_counts) { made_counts_ = made_counts; }

  // Bytes allocated for records, idle pooled chunks included.
  uint64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }
  uint64_t budget_bytes() const { return budget_bytes_; }
  size_t wake_threshold() const { return wake_threshold_; }
  // Records ever appended (buffered, whether exported yet or not).
  uint64_t AppendedTotal();

 private:
  friend class ThreadBuffer;
  bool TryCharge(uint64_t bytes);
  void Refund(uint64_t bytes);
  template <typename Chunk, typename T>
  void TakeChunks(std::vector<Chunk*>* chunks, ChunkPool<Chunk>* pool, std::vector<T>* out);

  const uint64_t budget_bytes_;
  const size_t wake_threshold_;
  LossCounters* const losses_;
  std::atomic<uint64_t> bytes_in_use_{0};
  ChunkPool<RangeChunk> range_pool_;
  ChunkPool<KernelChunk> kernel_pool_;
  void (*wake_)(void*) = nullptr;
  void* wake_context_ = nullptr;
  MadeCountsPage* made_counts_ = nullptr;
  // Guards the buffer list; taken when a thread first records or exits, and by the exporter.
  // Lock order: registry mutex, then a buffer's mutex.
  Mutex mutex_;
  std::vector<ThreadBuffer*> buffers_ FS_GUARDED_BY(mutex_);
  uint64_t appended_by_freed_buffers_ FS_GUARDED_BY(mutex_) = 0;
};

}  // namespace flopscope::injector
