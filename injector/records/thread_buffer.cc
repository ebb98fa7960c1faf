#include "injector/records/thread_buffer.h"

#include <algorithm>
#include <utility>

namespace flopscope::injector {
namespace {

uint64_t MetadataBytes(const MetadataRecord& record) {
  return sizeof record + record.key.capacity() + record.value.capacity();
}

template <typename T>
void MoveAll(std::vector<T>* from, std::vector<T>* to) {
  if (to->empty()) {
    to->swap(*from);
  } else {
    for (T& record : *from) to->push_back(std::move(record));
  }
  *from = {};
}

}  // namespace

template <typename Chunk, typename T>
bool ThreadBuffer::AppendLocked(std::vector<Chunk*>* chunks, ChunkPool<Chunk>* pool,
                                const T& record) {
  if (chunks->empty() || chunks->back()->full()) {
    Chunk* chunk = pool->Acquire([this](uint64_t bytes) { return registry_->TryCharge(bytes); });
    if (chunk == nullptr) {
      registry_->losses_->Add(LossCause::kBufferFull, 1);
      return false;
    }
    chunks->push_back(chunk);
  }
  Chunk* chunk = chunks->back();
  chunk->records[chunk->count++] = record;
  AfterAppendLocked();
  return true;
}

void ThreadBuffer::AfterAppendLocked() {
  ++appended_total_;
  made_.Add(1);  // accepted: a BUFFER_FULL drop never reaches here
  if (++waiting_ == registry_->wake_threshold_ && registry_->wake_ != nullptr) {
    registry_->wake_(registry_->wake_context_);
  }
}

bool ThreadBuffer::AppendRange(const fs_range_event& event) {
  MutexLock lock(&mutex_);
  return AppendLocked(&ranges_, &registry_->range_pool_, event);
}

bool ThreadBuffer::AppendKernel(const fs_kernel& kernel) {
  MutexLock lock(&mutex_);
  return AppendLocked(&kernels_, &registry_->kernel_pool_, kernel);
}

size_t ThreadBuffer::AppendKernels(const fs_kernel* kernels, size_t count) {
  MutexLock lock(&mutex_);
  for (size_t i = 0; i < count; ++i) {
    if (!AppendLocked(&kernels_, &registry_->kernel_pool_, kernels[i])) {
      registry_->losses_->Add(LossCause::kBufferFull, count - i - 1);  // this one counted already
      return i;
    }
  }
  return count;
}

template <typename T>
bool ThreadBuffer::AppendOwnedLocked(std::vector<T>* records, T record, uint64_t bytes) {
  if (!registry_->TryCharge(bytes)) {
    registry_->losses_->Add(LossCause::kBufferFull, 1);
    return false;
  }
  owned_bytes_ += bytes;
  records->push_back(std::move(record));
  AfterAppendLocked();
  return true;
}

bool ThreadBuffer::AppendMetadata(MetadataRecord record) {
  const uint64_t bytes = MetadataBytes(record);
  MutexLock lock(&mutex_);
  return AppendOwnedLocked(&metadata_, std::move(record), bytes);
}

size_t ThreadBuffer::AppendKernelFlops(std::vector<KernelFlopsRecord>* records) {
  MutexLock lock(&mutex_);
  size_t appended = 0;
  for (KernelFlopsRecord& record : *records) {
    const uint64_t bytes = record.Bytes();
    if (AppendOwnedLocked(&kernel_flops_, std::move(record), bytes)) ++appended;
  }
  records->clear();
  return appended;
}

bool ThreadBuffer::AppendWindow(CounterWindowRecord record) {
  const uint64_t bytes = record.Bytes();
  MutexLock lock(&mutex_);
  return AppendOwnedLocked(&windows_, std::move(record), bytes);
}

BufferRegistry::BufferRegistry(uint64_t budget_bytes, LossCounters* losses)
    : budget_bytes_(budget_bytes),
      wake_threshold_(
          std::clamp<size_t>(budget_bytes / sizeof(fs_range_event) / 4, 64, kWakeThreshold)),
      losses_(losses) {}

ThreadBuffer* BufferRegistry::Register() {
  auto* buffer = new ThreadBuffer(this);
  if (made_counts_ != nullptr) {
    MutexLock buffer_lock(&buffer->mutex_);
    buffer->made_ = made_counts_->Acquire();
  }
  MutexLock lock(&mutex_);
  buffers_.push_back(buffer);
  return buffer;
}

void BufferRegistry::Release(ThreadBuffer* buffer) {
  MutexLock lock(&buffer->mutex_);
  buffer->orphaned_ = true;
}

template <typename Chunk, typename T>
void BufferRegistry::TakeChunks(std::vector<Chunk*>* chunks, ChunkPool<Chunk>* pool,
                                std::vector<T>* out) {
  size_t total = out->size();
  for (const Chunk* chunk : *chunks) total += chunk->count;
  out->reserve(total);
  for (const Chunk* chunk : *chunks) {
    out->insert(out->end(), chunk->records, chunk->records + chunk->count);
  }
  pool->Release(chunks, [this](uint64_t bytes) { Refund(bytes); });
}

void BufferRegistry::DrainAll(RecordSet* out) {
  MutexLock lock(&mutex_);
  auto keep = buffers_.begin();
  for (ThreadBuffer* buffer : buffers_) {
    std::vector<RangeChunk*> ranges;
    std::vector<KernelChunk*> kernels;
    std::vector<MetadataRecord> metadata;
    std::vector<KernelFlopsRecord> kernel_flops;
    std::vector<CounterWindowRecord> windows;
    uint64_t owned_bytes;
    uint64_t appended_total;
    bool orphaned;
    MadeCountsPage::Counter made;
    {
      // Swap under the lock (constant time) so the owner thread never waits for the copy.
      MutexLock buffer_lock(&buffer->mutex_);
      std::swap(ranges, buffer->ranges_);
      std::swap(kernels, buffer->kernels_);
      std::swap(metadata, buffer->metadata_);
      std::swap(kernel_flops, buffer->kernel_flops_);
      std::swap(windows, buffer->windows_);
      owned_bytes = std::exchange(buffer->owned_bytes_, 0);
      buffer->waiting_ = 0;
      appended_total = buffer->appended_total_;
      orphaned = buffer->orphaned_;
      made = buffer->made_;
    }
    TakeChunks(&ranges, &range_pool_, &out->ranges);
    TakeChunks(&kernels, &kernel_pool_, &out->kernels);
    MoveAll(&metadata, &out->metadata);
    MoveAll(&kernel_flops, &out->kernel_flops);
    MoveAll(&windows, &out->windows);
    Refund(owned_bytes);
    if (orphaned) {
      appended_by_freed_buffers_ += appended_total;  // no owner left to append
      // Its slot is free for the next thread; its count stays in the file.
      if (made_counts_ != nullptr) made_counts_->Release(made);
      delete buffer;
    } else {
      *keep++ = buffer;
    }
  }
  buffers_.erase(keep, buffers_.end());
}

uint64_t BufferRegistry::AppendedTotal() {
  MutexLock lock(&mutex_);
  uint64_t total = appended_by_freed_buffers_;
  for (ThreadBuffer* buffer : buffers_) {
    MutexLock buffer_lock(&buffer->mutex_);
    total += buffer->appended_total_;
  }
  return total;
}

bool BufferRegistry::TryCharge(uint64_t bytes) {
  // Relaxed: the counter bounds memory, it orders nothing else.
  const uint64_t before = bytes_in_use_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes <= budget_bytes_) return true;
  bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

void BufferRegistry::Refund(uint64_t bytes) {
  bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace flopscope::injector
