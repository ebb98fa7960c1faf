#include "examples/transformer_nvtx/data_loader.h"

#include "examples/transformer_nvtx/nvtx_ranges.h"

namespace transformer_nvtx {

DataLoader::DataLoader(int batches, int64_t tokens_per_batch)
    : batches_(batches), tokens_per_batch_(tokens_per_batch), thread_([this] { Produce(); }) {}

DataLoader::~DataLoader() {
  // Normally the producer is done by now. If the consumer stopped early, it may be waiting for
  // room: tell it to stop instead.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Batch DataLoader::MakeBatch(int index, int64_t tokens_per_batch) {
  // A linear congruential sequence: cheap, deterministic, different per batch.
  Batch batch(static_cast<size_t>(tokens_per_batch));
  uint32_t state = 2166136261u ^ static_cast<uint32_t>(index);
  for (int32_t& token : batch) {
    state = state * 1664525u + 1013904223u;
    token = static_cast<int32_t>(state >> 17);
  }
  return batch;
}

void DataLoader::Produce() {
  for (int index = 0; index < batches_; ++index) {
    Batch batch;
    {
      // Both ranges are pushed and popped on this thread (NVTX push/pop is per thread).
      ScopedModuleRange loader("DataLoader");
      ScopedModuleRange next("next_batch");
      batch = MakeBatch(index, tokens_per_batch_);
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return stopping_ || ready_.size() < kPrefetchDepth; });
    if (stopping_) return;
    ready_.push_back(std::move(batch));
    lock.unlock();
    changed_.notify_all();
  }
}

Batch DataLoader::Next() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty(); });
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return batch;
}

}  // namespace transformer_nvtx
