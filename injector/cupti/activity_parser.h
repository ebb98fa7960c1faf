#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "injector/kernel_api.h"

namespace flopscope::injector::cupti {

// flopscope.v1.ActivityKind values.
inline constexpr uint32_t kActivityKernel = 1;
inline constexpr uint32_t kActivityMemcpy = 2;
inline constexpr uint32_t kActivityMemset = 3;

// What the injector reports about a device (flopscope.v1.Device), from CUPTI's DEVICE record.
struct DeviceFacts {
  uint32_t id = 0;
  std::string name;
  uint32_t sm_count = 0;
  uint64_t memory_bytes = 0;
  uint32_t sm_clock_khz = 0;
  uint32_t compute_capability = 0;  // major * 10 + minor
  std::string uuid;                 // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
};

// The GPU activities of one CUPTI buffer, not yet attributed (path and instance zero).
struct ParsedBuffer {
  std::vector<KernelRecord> records;
  // names[i]: CUPTI's (mangled) name of records[i] when it is a kernel, else null. Valid only
  // while the buffer is (CUPTI owns the strings).
  std::vector<const char*> names;
  std::vector<DeviceFacts> devices;
  uint64_t untimed = 0;  // memcpys/memsets CUPTI could not time (start or end 0, end < start)
  // Correlation ids of kernels CUPTI could not time: a kernel profiled in kernel replay comes
  // without timestamps (H200, 2026-11-26), which is no loss (its FLOPs come as KernelFlops).
  std::vector<uint32_t> untimed_kernels;
  uint64_t other_records = 0;  // kinds the tracer does not use
  bool truncated = false;      // bytes were left after the last whole record
};

// Walks a completed buffer with CUPTI's own iterator (cuptiActivityGetNextRecord), which knows
// the stride of every kind in this CUPTI version, and keeps kernels (CONCURRENT_KERNEL and
// KERNEL, CUpti_ActivityKernel10), memcpys (MEMCPY and MEMCPY2), memsets and devices. The walk
// ends at CUPTI_ERROR_MAX_LIMIT_REACHED (normal end, or a record cut short) or INVALID_KIND (a
// zero or garbage tail); a tail that is not a whole record sets `truncated`. Never throws on
// bad input: whatever parses before the damage is kept.
void ParseActivityBuffer(decltype(&::cuptiActivityGetNextRecord) next_record, uint8_t* buffer,
                         size_t valid_size, ParsedBuffer* out);

}  // namespace flopscope::injector::cupti
