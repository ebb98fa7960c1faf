#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "common/spool/spool_file.h"
#include "flopscope/v1/collector.pb.h"

namespace flopscope::transport {

// One encoded batch waiting for its acknowledgement. The message is shared so the writer can
// send it without copying while an ack may remove it from the queue. A logged batch has a copy
// in the spool file at `spooled` (the write-ahead log); a spooled one has only that copy, no
// message in memory.
struct PendingBatch {
  uint64_t seq = 0;
  std::shared_ptr<const v1::UpMessage> message;  // null when spooled
  uint64_t records = 0;   // ranges + kernels + metadata (what a rejection loses)
  uint64_t bytes = 0;     // memory held (its protobuf arena); 0 when spooled
  bool salvage = false;   // already rejected once and cut down to its definitions
  bool logged = false;    // a copy is in the spool file
  bool in_spool = false;  // only in the spool file (implies logged)
  SpoolFile::Entry spooled;
};

// Unacknowledged batches in sequence order, kept for resending after a reconnect. Not
// thread-safe: GrpcTransport guards it with its mutex.
class PendingQueue {
 public:
  explicit PendingQueue(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Whether a batch of `bytes` fits under the bound. An empty queue always has room, so a single
  // large batch cannot block the session forever.
  bool HasRoomFor(uint64_t bytes) const { return queue_.empty() || bytes_ + bytes <= max_bytes_; }
  // Seqs must increase.
  void Push(PendingBatch batch);
  // Drops every batch with seq <= committed (an ack, or the welcome); returns how many.
  uint64_t AckThrough(uint64_t committed);
  // Drops one batch (rejected by the daemon) and returns it, if present.
  std::optional<PendingBatch> Remove(uint64_t seq);
  // Replaces the batch with the same seq (keeping the byte count right); false when absent.
  bool Replace(PendingBatch batch);
  // The batch with this seq, or null.
  const PendingBatch* Find(uint64_t seq) const;
  // The first batch with seq > after, or null.
  const PendingBatch* NextAfter(uint64_t after) const;

  // Calls visit(batch) for each batch still in memory (not spooled), oldest first.
  template <typename VisitFn>
  void ForEachInMemory(VisitFn visit) const {
    for (const PendingBatch& batch : queue_) {
      if (!batch.in_spool) visit(batch);
    }
  }

  // The spool-file copies of the logged batches, oldest first (for SpoolFile::Compact), and the
  // bytes their frames take.
  std::vector<SpoolFile::Entry*> LoggedEntries(uint64_t* frame_bytes) {
    std::vector<SpoolFile::Entry*> entries;
    *frame_bytes = 0;
    for (PendingBatch& batch : queue_) {
      if (!batch.logged) continue;
      entries.push_back(&batch.spooled);
      *frame_bytes += SpoolFile::FrameBytes(batch.spooled.length);
    }
    return entries;
  }

  // Calls spool(batch) for each batch still in memory, oldest first; a batch it returns true for
  // is marked spooled at *entry and its memory freed. One it refuses stays in memory, and the
  // later ones are still offered: a batch written ahead earlier only needs marking.
  template <typename SpoolFn>
  void SpoolInMemory(SpoolFn spool) {
    for (PendingBatch& batch : queue_) {
      if (batch.in_spool) continue;
      SpoolFile::Entry entry;
      if (!spool(batch, &entry)) continue;
      Account(batch, -1);
      batch.logged = true;
      batch.in_spool = true;
      batch.spooled = entry;
      batch.message.reset();
      batch.bytes = 0;
      Account(batch, +1);
    }
  }

  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  uint64_t spooled_records() const { return spooled_records_; }

 private:
  void Account(const PendingBatch& batch, int sign);

  const uint64_t max_bytes_;
  std::deque<PendingBatch> queue_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
  uint64_t spooled_records_ = 0;
};

}  // namespace flopscope::transport
