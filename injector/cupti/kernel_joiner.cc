#include "injector/cupti/kernel_joiner.h"

namespace flopscope::injector::cupti {

KernelJoiner::KernelJoiner(const LaunchRing* ring, const GraphNodeTable* nodes, Options options)
    : ring_(ring), nodes_(nodes), options_(options) {}

KernelJoiner::Result KernelJoiner::Attribute(KernelRecord* record) {
  RangeContext context;
  bool counted = false;
  const LaunchRing::Outcome launch =
      ring_->Find(static_cast<uint32_t>(record->correlation_id), &context, &counted);
  // Counted or not is a property of the launch (for a graph node: of the graph launch).
  record->counted = launch == LaunchRing::Outcome::kFound && counted;
  if (record->graph_node_id != 0 && nodes_->Find(record->graph_node_id, &context)) {
    record->path_id = context.path_id;
    record->range_instance_id = 0;
    ++counters_.by_graph_node;
    return Result::kDone;
  }
  switch (launch) {
    case LaunchRing::Outcome::kFound:
      record->path_id = context.path_id;
      record->range_instance_id = context.instance_id;
      ++counters_.by_launch;
      return Result::kDone;
    case LaunchRing::Outcome::kOverwritten:
      record->path_id = 0;
      record->range_instance_id = 0;
      ++counters_.launch_not_seen;
      return Result::kDone;
    case LaunchRing::Outcome::kNotYet:
      break;
  }
  return Result::kWait;
}

void KernelJoiner::Release(KernelRecord record, std::vector<KernelRecord>* out) {
  // One last look: the launch may have been recorded since the previous attempt.
  if (Attribute(&record) == Result::kWait) {
    record.path_id = 0;
    record.range_instance_id = 0;
    ++counters_.launch_not_seen;
  }
  out->push_back(record);
}

void KernelJoiner::RetryWaiting(std::vector<KernelRecord>* out) {
  std::deque<Waiting> still;
  for (Waiting& waiting : pending_) {
    if (Attribute(&waiting.record) == Result::kDone) {
      out->push_back(waiting.record);
    } else {
      still.push_back(waiting);
    }
  }
  pending_.swap(still);
}

void KernelJoiner::Join(std::vector<KernelRecord>* records, std::vector<KernelRecord>* out) {
  if (!pending_.empty()) RetryWaiting(out);
  if (out->empty()) {
    // The usual case: attribute in place and hand the vector over, no record copied.
    size_t kept = 0;
    for (size_t i = 0; i < records->size(); ++i) {
      KernelRecord& record = (*records)[i];
      if (Attribute(&record) == Result::kWait) {
        Wait(record, out);
        continue;
      }
      if (kept != i) (*records)[kept] = record;
      ++kept;
    }
    records->resize(kept);
    if (out->empty()) {
      out->swap(*records);
    } else {  // released by Wait because too many were waiting
      out->insert(out->end(), records->begin(), records->end());
    }
    return;
  }
  for (KernelRecord& record : *records) {
    if (Attribute(&record) == Result::kDone) {
      out->push_back(record);
      continue;
    }
    Wait(record, out);
  }
}

void KernelJoiner::Wait(const KernelRecord& record, std::vector<KernelRecord>* out) {
  ++counters_.waited;
  if (pending_.size() >= options_.max_pending) {
    Release(pending_.front().record, out);
    pending_.pop_front();
  }
  pending_.push_back(Waiting{record, 0});
}

void KernelJoiner::Age(bool final, std::vector<KernelRecord>* out) {
  if (pending_.empty()) return;
  RetryWaiting(out);
  std::deque<Waiting> still;
  for (Waiting& waiting : pending_) {
    if (final || ++waiting.age >= options_.max_age) {
      Release(waiting.record, out);
    } else {
      still.push_back(waiting);
    }
  }
  pending_.swap(still);
}

}  // namespace flopscope::injector::cupti
