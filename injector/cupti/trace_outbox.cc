#include "injector/cupti/trace_outbox.h"

#include <iterator>

namespace flopscope::injector::cupti {

TraceOutbox::Batch TraceOutbox::TakeSpare() {
  MutexLock lock(&mutex_);
  if (spares_.empty()) return {};
  Batch spare = std::move(spares_.back());
  spares_.pop_back();
  return spare;
}

void TraceOutbox::ReturnSpare(Batch batch) {
  batch.clear();
  MutexLock lock(&mutex_);
  if (spares_.size() < kMaxSpares) spares_.push_back(std::move(batch));
}

bool TraceOutbox::Add(Batch records, std::vector<MetadataPair>* metadata) {
  MutexLock lock(&mutex_);
  const size_t room = max_records_ > waiting_records_ ? max_records_ - waiting_records_ : 0;
  if (records.size() > room) {
    waiting_.overflow += records.size() - room;
    records.resize(room);
  }
  waiting_records_ += records.size();
  if (!records.empty()) waiting_.batches.push_back(std::move(records));
  // Metadata (device facts, counters) is a handful of entries per device: never refused.
  waiting_.metadata.insert(waiting_.metadata.end(), std::make_move_iterator(metadata->begin()),
                           std::make_move_iterator(metadata->end()));
  metadata->clear();
  return waiting_records_ >= kWakeThreshold;
}

void TraceOutbox::Take(Contents* out) {
  Contents taken;
  {
    MutexLock lock(&mutex_);
    std::swap(taken, waiting_);
    waiting_records_ = 0;
  }
  for (Batch& batch : taken.batches) out->batches.push_back(std::move(batch));
  out->metadata.insert(out->metadata.end(), std::make_move_iterator(taken.metadata.begin()),
                       std::make_move_iterator(taken.metadata.end()));
  out->overflow += taken.overflow;
}

}  // namespace flopscope::injector::cupti
