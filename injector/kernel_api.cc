#include "injector/kernel_api.h"

#include <algorithm>

#include "injector/session.h"

namespace flopscope::injector {

RangeContext CurrentRangeContext() noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return {};
  try {
    return session->tracker().CurrentContext();
  } catch (...) {
    return {};
  }
}

uint32_t InternKernelName(std::string_view name) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  try {
    return session->strings().Intern(name);
  } catch (...) {
    return 0;
  }
}

namespace {

fs_kernel ToAbi(const KernelRecord& r) {
  fs_kernel kernel{};
  kernel.correlation_id = r.correlation_id;
  kernel.path_id = r.path_id;
  kernel.range_instance_id = r.range_instance_id;
  kernel.name_id = r.name_id;
  kernel.device_id = r.device_id;
  kernel.context_id = r.context_id;
  kernel.stream_id = r.stream_id;
  kernel.start_ns = r.start_ns;
  kernel.end_ns = r.end_ns;
  kernel.grid_x = r.grid_x;
  kernel.grid_y = r.grid_y;
  kernel.grid_z = r.grid_z;
  kernel.block_x = r.block_x;
  kernel.block_y = r.block_y;
  kernel.block_z = r.block_z;
  kernel.kind = r.kind;
  kernel.bytes = r.bytes;
  kernel.graph_id = r.graph_id;
  kernel.graph_node_id = r.graph_node_id;
  kernel.counted = r.counted ? 1 : 0;
  return kernel;
}

}  // namespace

bool EnqueueKernelRecord(const KernelRecord& record) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return false;
  try {
    return session->tracker().AppendKernel(ToAbi(record));
  } catch (...) {
    return false;
  }
}

size_t EnqueueKernelRecords(const KernelRecord* records, size_t count) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  constexpr size_t kChunk = 256;  // converted on the stack, appended under one lock
  fs_kernel converted[kChunk];
  size_t buffered = 0;
  try {
    for (size_t first = 0; first < count; first += kChunk) {
      const size_t n = std::min(kChunk, count - first);
      for (size_t i = 0; i < n; ++i) converted[i] = ToAbi(records[first + i]);
      const size_t appended = session->tracker().AppendKernels(converted, n);
      buffered += appended;
      if (appended < n) {  // the budget is spent: the rest would be dropped one by one anyway
        session->losses().Add(LossCause::kBufferFull, count - first - n);
        break;
      }
    }
  } catch (...) {
  }
  return buffered;
}

void CountCuptiDropped(uint64_t records) noexcept {
  if (Session* session = Session::Current()) {
    session->losses().Add(LossCause::kCuptiDropped, records);
  }
}

bool EnqueueMetadata(std::string_view key, std::string_view value) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return false;
  try {
    return session->tracker().AppendMetadata(std::string(key), std::string(value));
  } catch (...) {
    return false;
  }
}

PhaseContext CurrentPhase() noexcept {
  Session* session = Session::Current();
  return session == nullptr ? PhaseContext{} : session->steps().Current();
}

void SetRangesCounted(bool counted) noexcept {
  if (Session* session = Session::Current()) session->steps().SetRangesCounted(counted);
}

size_t EnqueueKernelFlops(std::vector<KernelFlopsRecord>* records) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  try {
    return session->tracker().AppendKernelFlops(records);
  } catch (...) {
    return 0;
  }
}

bool EnqueueCounterWindow(CounterWindowRecord record) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return false;
  try {
    return session->tracker().AppendWindow(std::move(record));
  } catch (...) {
    return false;
  }
}

void CountCounterUnmatched(uint64_t records) noexcept {
  if (Session* session = Session::Current()) {
    session->losses().Add(LossCause::kCounterUnmatched, records);
  }
}

void RearmTracingExit() noexcept {
  if (Session::Current() != nullptr) Session::RearmTracingExit();
}

}  // namespace flopscope::injector
