#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace transformer_nvtx {

using Batch = std::vector<int32_t>;  // token ids, batch × seq

// A background "data loader" thread, as frameworks have: it prepares exactly `batches` batches,
// each inside the default-domain ranges DataLoader > next_batch on its own thread, and hands them
// over through a small bounded queue (prefetch depth 2). Deterministic: one range pair per batch,
// and the thread is joined by the destructor.
class DataLoader {
 public:
  DataLoader(int batches, int64_t tokens_per_batch);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Blocks until the next batch is ready. Call at most `batches` times.
  Batch Next();

  // A batch made on the calling thread without any range (used with --no-loader-thread).
  static Batch MakeBatch(int index, int64_t tokens_per_batch);

 private:
  static constexpr size_t kPrefetchDepth = 2;

  void Produce();

  const int batches_;
  const int64_t tokens_per_batch_;
  // Guards ready_ and stopping_: the loader thread pushes, the training thread pops, the
  // destructor stops. changed_ is signalled after every change to either.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace transformer_nvtx
