#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti::testing {
namespace {
thread_local RangeContext t_context;
}  // namespace

void RecordingSink::SetThreadContext(RangeContext context) { t_context = context; }

RangeContext RecordingSink::CurrentContext() noexcept { return t_context; }

uint32_t RecordingSink::InternName(std::string_view mangled_name) noexcept {
  MutexLock lock(&mutex_);
  auto [it, added] =
      names_.emplace(std::string(mangled_name), static_cast<uint32_t>(names_.size() + 1));
  return it->second;
}

size_t RecordingSink::Enqueue(const KernelRecord* records, size_t count) noexcept {
  MutexLock lock(&mutex_);
  records_.insert(records_.end(), records, records + count);
  return count;
}

void RecordingSink::Metadata(std::string_view key, std::string_view value) noexcept {
  MutexLock lock(&mutex_);
  metadata_.emplace_back(std::string(key), std::string(value));
}

void RecordingSink::CountDropped(uint64_t records) noexcept {
  MutexLock lock(&mutex_);
  dropped_ += records;
}

void RecordingSink::CountBufferFull(uint64_t records) noexcept {
  MutexLock lock(&mutex_);
  buffer_full_ += records;
}

void RecordingSink::Wake() noexcept {
  MutexLock lock(&mutex_);
  ++wakes_;
}

std::vector<KernelRecord> RecordingSink::records() {
  MutexLock lock(&mutex_);
  return records_;
}

std::vector<std::pair<std::string, std::string>> RecordingSink::metadata() {
  MutexLock lock(&mutex_);
  return metadata_;
}

std::string RecordingSink::NameOf(uint32_t id) {
  MutexLock lock(&mutex_);
  for (const auto& [name, name_id] : names_) {
    if (name_id == id) return name;
  }
  return "";
}

uint64_t RecordingSink::dropped() {
  MutexLock lock(&mutex_);
  return dropped_;
}

uint64_t RecordingSink::buffer_full() {
  MutexLock lock(&mutex_);
  return buffer_full_;
}

uint64_t RecordingSink::wakes() {
  MutexLock lock(&mutex_);
  return wakes_;
}

void RecordingSink::SetPhase(PhaseContext phase) {
  MutexLock lock(&mutex_);
  phase_ = phase;
}

PhaseContext RecordingSink::CurrentPhase() noexcept {
  MutexLock lock(&mutex_);
  return phase_;
}

void RecordingSink::SetRangesCounted(bool counted) noexcept {
  MutexLock lock(&mutex_);
  ranges_counted_ = counted;
}

size_t RecordingSink::EnqueueFlops(std::vector<KernelFlopsRecord>* records) noexcept {
  MutexLock lock(&mutex_);
  const size_t count = records->size();
  for (KernelFlopsRecord& record : *records) flops_.push_back(std::move(record));
  records->clear();
  return count;
}

void RecordingSink::WindowClosed(CounterWindowRecord window) noexcept {
  MutexLock lock(&mutex_);
  windows_.push_back(std::move(window));
}

void RecordingSink::CountCounterUnmatched(uint64_t records) noexcept {
  MutexLock lock(&mutex_);
  unmatched_ += records;
}

std::vector<KernelFlopsRecord> RecordingSink::flops() {
  MutexLock lock(&mutex_);
  return flops_;
}

std::vector<CounterWindowRecord> RecordingSink::windows() {
  MutexLock lock(&mutex_);
  return windows_;
}

uint64_t RecordingSink::unmatched() {
  MutexLock lock(&mutex_);
  return unmatched_;
}

bool RecordingSink::ranges_counted() {
  MutexLock lock(&mutex_);
  return ranges_counted_;
}

}  // namespace flopscope::injector::cupti::testing
