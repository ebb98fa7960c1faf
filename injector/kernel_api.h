#pragma once

#include <cstdint>
#include <string_view>

#include "injector/ranges/range_tracker.h"
#include "injector/ranges/step_tracker.h"
#include "injector/records/counter_records.h"
#include "injector/transport/transport_abi.h"

// The injector's internal API for kernel tracing (injector/cupti, through KernelApiSink). Every
// function is noexcept, callable from any thread (CUPTI callbacks and buffer threads included),
// and does nothing when no session runs.
namespace flopscope::injector {

// One GPU activity (flopscope.v1.KernelRecord) without counters.
struct KernelRecord {
  uint64_t correlation_id = 0;
  uint64_t path_id = 0;            // RangeContext::path_id captured at launch
  uint64_t range_instance_id = 0;  // RangeContext::instance_id captured at launch
  uint32_t name_id = 0;            // from InternKernelName; 0 for memcpy / memset
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  int64_t start_ns = 0, end_ns = 0;  // CLOCK_REALTIME ns, already converted (not RangeClock)
  uint32_t grid_x = 0, grid_y = 0, grid_z = 0;
  uint32_t block_x = 0, block_y = 0, block_z = 0;
  uint32_t kind = FS_ACTIVITY_KIND_KERNEL;  // enum fs_activity_kind
  uint64_t bytes = 0, graph_id = 0, graph_node_id = 0;
  bool counted = false;  // launched inside a counter window (kernel replay slowed it)
};

// The innermost open module range of the calling thread (zeros when none): call at the launch
// callback (CUPTI_API_ENTER) and keep it with the correlation id.
RangeContext CurrentRangeContext() noexcept;

// Interns a (mangled) kernel name as a StringDef; 0 when no session runs or the table is full.
uint32_t InternKernelName(std::string_view name) noexcept;

// Buffers a kernel record for export; false when dropped (counted as BUFFER_FULL) or no session.
bool EnqueueKernelRecord(const KernelRecord& record) noexcept;
// The same for many at once (one buffer lock per few hundred); returns how many were buffered.
size_t EnqueueKernelRecords(const KernelRecord* records, size_t count) noexcept;

// Adds CUPTI's own dropped-record count to the CUPTI_DROPPED loss counter.
void CountCuptiDropped(uint64_t records) noexcept;

// Buffers a metadata entry (flopscope.v1.Metadata) the injector learned itself, such as
// `gpu.0.name` or `gpu.status`; false when dropped or no session runs.
bool EnqueueMetadata(std::string_view key, std::string_view value) noexcept;

// ---- counter windows (FLOPs) ----

// The process's step and phase right now (StepTracker::Current); empty without a session.
PhaseContext CurrentPhase() noexcept;
// Turns RangeEvent.counted on or off for the ranges that close from now on.
void SetRangesCounted(bool counted) noexcept;
// Buffers counted FLOPs (consumed); returns how many were buffered, the rest counted as
// BUFFER_FULL.
size_t EnqueueKernelFlops(std::vector<KernelFlopsRecord>* records) noexcept;
bool EnqueueCounterWindow(CounterWindowRecord record) noexcept;
// Counter ranges or launches of a window that could not be paired (LOSS_CAUSE_COUNTER_UNMATCHED).
void CountCounterUnmatched(uint64_t records) noexcept;
// Registers the tracer's exit handler once more (TraceSink::RearmExitHandler).
void RearmTracingExit() noexcept;

}  // namespace flopscope::injector
