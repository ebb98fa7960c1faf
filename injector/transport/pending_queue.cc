#include "injector/transport/pending_queue.h"

#include <algorithm>

namespace flopscope::transport {

void PendingQueue::Account(const PendingBatch& batch, int sign) {
  // Unsigned wrap-around makes the subtraction exact.
  const uint64_t s = static_cast<uint64_t>(static_cast<int64_t>(sign));
  bytes_ += s * batch.bytes;
  records_ += s * batch.records;
  if (batch.in_spool) spooled_records_ += s * batch.records;
}

void PendingQueue::Push(PendingBatch batch) {
  Account(batch, +1);
  queue_.push_back(std::move(batch));
}

uint64_t PendingQueue::AckThrough(uint64_t committed) {
  uint64_t dropped = 0;
  while (!queue_.empty() && queue_.front().seq <= committed) {
    Account(queue_.front(), -1);
    queue_.pop_front();
    ++dropped;
  }
  return dropped;
}

std::optional<PendingBatch> PendingQueue::Remove(uint64_t seq) {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [seq](const PendingBatch& batch) { return batch.seq == seq; });
  if (it == queue_.end()) return std::nullopt;
  PendingBatch removed = std::move(*it);
  Account(removed, -1);
  queue_.erase(it);
  return removed;
}

bool PendingQueue::Replace(PendingBatch batch) {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&batch](const PendingBatch& b) { return b.seq == batch.seq; });
  if (it == queue_.end()) return false;
  Account(*it, -1);
  Account(batch, +1);
  *it = std::move(batch);
  return true;
}

const PendingBatch* PendingQueue::Find(uint64_t seq) const {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [seq](const PendingBatch& batch) { return batch.seq == seq; });
  return it == queue_.end() ? nullptr : &*it;
}

const PendingBatch* PendingQueue::NextAfter(uint64_t after) const {
  auto it =
      std::upper_bound(queue_.begin(), queue_.end(), after,
                       [](uint64_t seq, const PendingBatch& batch) { return seq < batch.seq; });
  return it == queue_.end() ? nullptr : &*it;
}

}  // namespace flopscope::transport
