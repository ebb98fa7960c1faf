#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "injector/cupti/device_catalog.h"
#include "injector/kernel_api.h"

namespace flopscope::injector::cupti {

// Attributed records and metadata waiting for the exporter thread.
//
// CUPTI delivers buffers on whatever thread it likes: its worker, the thread that called
// cuptiActivityFlushAll, or an application thread destroying a context, possibly during exit()
// after that thread's own buffer is gone. So buffer processing never appends to the calling
// thread's buffer; it parks its output here and the exporter thread, which lives to the end,
// moves it into the session at the start of its next cycle.
//
// Records move as whole vectors (one per CUPTI buffer), never one by one, and emptied vectors
// come back as spares with their capacity, so a steady job copies and allocates nothing here.
//
// Thread-safe: one mutex, held only to move vectors.
class TraceOutbox {
 public:
  static constexpr size_t kDefaultMaxRecords = 1u << 20;
  static constexpr size_t kWakeThreshold = 8192;
  static constexpr size_t kMaxSpares = 8;

  using Batch = std::vector<KernelRecord>;
  struct Contents {
    std::vector<Batch> batches;
    std::vector<MetadataPair> metadata;
    uint64_t overflow = 0;  // records refused because the outbox was full
  };

  explicit TraceOutbox(size_t max_records = kDefaultMaxRecords) : max_records_(max_records) {}

  // An empty vector, with room from an earlier batch when one is spare.
  Batch TakeSpare();
  void ReturnSpare(Batch batch);

  // Moves the records and metadata in. Returns true when enough records wait to be worth an
  // early exporter cycle.
  bool Add(Batch records, std::vector<MetadataPair>* metadata);
  // Takes everything waiting (appending to *out).
  void Take(Contents* out);

 private:
  const size_t max_records_;
  Mutex mutex_;  // guards everything below
  Contents waiting_ FS_GUARDED_BY(mutex_);
  size_t waiting_records_ FS_GUARDED_BY(mutex_) = 0;
  std::vector<Batch> spares_ FS_GUARDED_BY(mutex_);
};

}  // namespace flopscope::injector::cupti
