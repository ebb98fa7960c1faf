#include "injector/kernel_api_sink.h"

#include "injector/session.h"

namespace flopscope::injector {

RangeContext KernelApiSink::CurrentContext() noexcept { return CurrentRangeContext(); }

uint32_t KernelApiSink::InternName(std::string_view mangled_name) noexcept {
  return InternKernelName(mangled_name);
}

size_t KernelApiSink::Enqueue(const KernelRecord* records, size_t count) noexcept {
  return EnqueueKernelRecords(records, count);
}

void KernelApiSink::Metadata(std::string_view key, std::string_view value) noexcept {
  EnqueueMetadata(key, value);
}

void KernelApiSink::CountDropped(uint64_t records) noexcept { CountCuptiDropped(records); }

void KernelApiSink::CountBufferFull(uint64_t records) noexcept {
  if (Session* session = Session::Current()) {
    session->losses().Add(LossCause::kBufferFull, records);
  }
}

void KernelApiSink::Wake() noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return;
  if (Exporter* exporter = session->exporter()) exporter->Wake();
}

PhaseContext KernelApiSink::CurrentPhase() noexcept { return injector::CurrentPhase(); }

void KernelApiSink::SetRangesCounted(bool counted) noexcept { injector::SetRangesCounted(counted); }

size_t KernelApiSink::EnqueueFlops(std::vector<KernelFlopsRecord>* records) noexcept {
  return EnqueueKernelFlops(records);
}

void KernelApiSink::WindowClosed(CounterWindowRecord window) noexcept {
  EnqueueCounterWindow(std::move(window));
}

void KernelApiSink::CountCounterUnmatched(uint64_t records) noexcept {
  injector::CountCounterUnmatched(records);
}

void KernelApiSink::RearmExitHandler() noexcept { RearmTracingExit(); }

}  // namespace flopscope::injector
