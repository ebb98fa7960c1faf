#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace flopscope::injector::cupti {

// The buffers CUPTI fills with activity records, under a total cap. CUPTI asks for one whenever
// it needs room (on its own threads and on application threads); when the cap is reached the
// pool says no, CUPTI drops records and counts them (cuptiActivityGetNumDroppedRecords), and the
// tracer reports that count as LOSS_CAUSE_CUPTI_DROPPED. Emptied buffers are kept for reuse up
// to a few, so a steady job allocates nothing.
//
// Thread-safe.
class ActivityBufferPool {
 public:
  static constexpr size_t kBufferBytes = 4u << 20;
  static constexpr size_t kAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT
  static constexpr size_t kMaxIdle = 4;

  ActivityBufferPool(uint64_t cap_bytes, size_t buffer_bytes = kBufferBytes);
  ActivityBufferPool(const ActivityBufferPool&) = delete;
  ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;
  ~ActivityBufferPool();

  // A buffer of buffer_bytes(), or null when the cap is reached (or memory is short).
  uint8_t* Acquire();
  void Release(uint8_t* buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  uint64_t cap_bytes() const { return cap_bytes_; }
  uint64_t bytes_allocated() const;
  // Of those, the bytes of the buffers CUPTI holds (given out, not handed back yet).
  uint64_t bytes_out() const;
  uint64_t refusals() const;

 private:
  const uint64_t cap_bytes_;
  const size_t buffer_bytes_;
  // Guards the counters and the idle list; held for a few instructions, never across a CUPTI
  // call (the callbacks that take it are called by CUPTI, not the other way round).
  mutable Mutex mutex_;
  std::vector<uint8_t*> idle_ FS_GUARDED_BY(mutex_);
  uint64_t allocated_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t refusals_ FS_GUARDED_BY(mutex_) = 0;
};

}  // namespace flopscope::injector::cupti
