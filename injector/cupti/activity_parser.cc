#include "injector/cupti/activity_parser.h"

#include <cstdio>

namespace flopscope::injector::cupti {
namespace {

bool Timed(uint64_t start, uint64_t end) { return start != 0 && end != 0 && end >= start; }

int64_t Ns(uint64_t timestamp) { return static_cast<int64_t>(timestamp); }

uint32_t Dim(int32_t value) { return value < 0 ? 0u : static_cast<uint32_t>(value); }

KernelRecord FromKernel(const CUpti_ActivityKernel10& k) {
  KernelRecord r;
  r.kind = kActivityKernel;
  r.correlation_id = k.correlationId;
  r.device_id = k.deviceId;
  r.context_id = k.contextId;
  r.stream_id = k.streamId;
  r.start_ns = Ns(k.start);
  r.end_ns = Ns(k.end);
  r.grid_x = Dim(k.gridX);
  r.grid_y = Dim(k.gridY);
  r.grid_z = Dim(k.gridZ);
  r.block_x = Dim(k.blockX);
  r.block_y = Dim(k.blockY);
  r.block_z = Dim(k.blockZ);
  r.graph_id = k.graphId;
  r.graph_node_id = k.graphNodeId;
  return r;
}

template <typename Copy>
KernelRecord FromMemory(const Copy& m, uint32_t kind) {
  KernelRecord r;
  r.kind = kind;
  r.correlation_id = m.correlationId;
  r.device_id = m.deviceId;
  r.context_id = m.contextId;
  r.stream_id = m.streamId;
  r.start_ns = Ns(m.start);
  r.end_ns = Ns(m.end);
  r.bytes = m.bytes;
  r.graph_id = m.graphId;
  r.graph_node_id = m.graphNodeId;
  return r;
}

std::string UuidText(const CUuuid& uuid) {
  char text[48];
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

DeviceFacts FromDevice(const CUpti_ActivityDevice5& d) {
  DeviceFacts facts;
  facts.id = d.id;
  facts.name = d.name != nullptr ? d.name : "";
  facts.sm_count = d.numMultiprocessors;
  facts.memory_bytes = d.globalMemorySize;
  facts.sm_clock_khz = d.coreClockRate;
  facts.compute_capability = d.computeCapabilityMajor * 10 + d.computeCapabilityMinor;
  facts.uuid = UuidText(d.uuid);
  return facts;
}

// Adds the activity when it has timestamps; returns the record's size for the tail check.
template <typename Record>
size_t Keep(const Record&, const KernelRecord& activity, const char* name, ParsedBuffer* out) {
  if (Timed(static_cast<uint64_t>(activity.start_ns), static_cast<uint64_t>(activity.end_ns))) {
    out->records.push_back(activity);
    out->names.push_back(name);
  } else {
    ++out->untimed;
  }
  return sizeof(Record);
}

// Returns the size of the record (0 for a kind whose layout this file does not know).
size_t Consume(const CUpti_Activity* record, ParsedBuffer* out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (!Timed(k.start, k.end)) {
        out->untimed_kernels.push_back(k.correlationId);
        return sizeof(k);
      }
      return Keep(k, FromKernel(k), k.name, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      return Keep(m, FromMemory(m, kActivityMemcpy), nullptr, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      return Keep(m, FromMemory(m, kActivityMemcpy), nullptr, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      return Keep(m, FromMemory(m, kActivityMemset), nullptr, out);
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto& d = *reinterpret_cast<const CUpti_ActivityDevice5*>(record);
      out->devices.push_back(FromDevice(d));
      return sizeof(d);
    }
    default:
      ++out->other_records;
      return 0;
  }
}

}  // namespace

void ParseActivityBuffer(decltype(&::cuptiActivityGetNextRecord) next_record, uint8_t* buffer,
                         size_t valid_size, ParsedBuffer* out) {
  if (buffer == nullptr || valid_size == 0 || next_record == nullptr) return;
  CUpti_Activity* record = nullptr;
  size_t parsed_end = 0;  // where the last record of a known size ended
  bool end_known = true;  // false after a record of unknown size
  while (next_record(buffer, valid_size, &record) == CUPTI_SUCCESS && record != nullptr) {
    const size_t size = Consume(record, out);
    const size_t offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(record) - buffer);
    end_known = size != 0;
    if (end_known) parsed_end = offset + size;
  }
  // CUPTI stops with MAX_LIMIT_REACHED both at the clean end and before a record cut short;
  // only the bytes left over tell the two apart.
  if (end_known && valid_size > parsed_end) out->truncated = true;
}

}  // namespace flopscope::injector::cupti
