#include "daemon/query/ordered_reads.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace flopscope::daemon {
namespace {

using Result = absl::StatusOr<RankSnapshot>;

// The shared state of one ReadInOrder: which index is claimed next, which results are ready.
class OrderedSlots {
 public:
  OrderedSlots(size_t count, size_t ahead) : slots_(count), ahead_(std::max<size_t>(ahead, 1)) {}

  // A worker's loop: claim the next index while the window allows, read it, store the result.
  void Work(const std::function<Result(size_t)>& read) ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      size_t index = 0;
      {
        absl::MutexLock lock(&mu_);  // guards next_, consumed_, stopped_
        mu_.Await(absl::Condition(this, &OrderedSlots::MayClaim));
        if (stopped_ || next_ >= slots_.size()) return;
        index = next_++;
      }
      Result result = read(index);  // outside the lock: the reads run in parallel
      absl::MutexLock lock(&mu_);   // guards slots_
      slots_[index] = std::move(result);
    }
  }

  // The consumer: waits for `index` (ready in any order, taken in order).
  Result Take(size_t index) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);  // guards slots_, waiting_for_, consumed_
    waiting_for_ = index;
    mu_.Await(absl::Condition(this, &OrderedSlots::Ready));
    Result result = std::move(*slots_[index]);
    slots_[index].reset();
    consumed_ = index + 1;
    return result;
  }

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);  // guards stopped_
    stopped_ = true;
  }

 private:
  bool MayClaim() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || next_ >= slots_.size() || next_ < consumed_ + ahead_;
  }
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return slots_[waiting_for_].has_value(); }

  absl::Mutex mu_;
  std::vector<std::optional<Result>> slots_ ABSL_GUARDED_BY(mu_);
  const size_t ahead_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t consumed_ ABSL_GUARDED_BY(mu_) = 0;
  size_t waiting_for_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void ReadInOrder(size_t count, size_t threads, size_t ahead,
                 const std::function<Result(size_t)>& read,
                 const std::function<bool(size_t, Result)>& consume) {
  if (threads <= 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) {
      if (!consume(i, read(i))) return;
    }
    return;
  }
  OrderedSlots slots(count, std::max(ahead, threads));
  std::vector<std::thread> workers;
  for (size_t i = 0; i < std::min(threads, count); ++i) {
    workers.emplace_back([&] { slots.Work(read); });
  }
  for (size_t i = 0; i < count; ++i) {
    if (!consume(i, slots.Take(i))) {
      slots.Stop();
      break;
    }
  }
  for (std::thread& worker : workers) worker.join();
}

size_t ReportReadThreads() {
  // At least 4: a cold read spends much of its time opening files (SQLite creates the WAL and
  // its index), which overlaps across threads even on a machine with fewer cores.
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 4, 8);
}

}  // namespace flopscope::daemon
