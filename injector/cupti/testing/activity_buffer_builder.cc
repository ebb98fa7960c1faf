#include "injector/cupti/testing/activity_buffer_builder.h"

namespace flopscope::injector::cupti::testing {

ActivityBufferBuilder& ActivityBufferBuilder::AddKernel(const Kernel& k, CUpti_ActivityKind kind) {
  CUpti_ActivityKernel10 record{};
  record.kind = kind;
  record.correlationId = k.correlation_id;
  record.start = k.start;
  record.end = k.end;
  record.name = k.name;
  record.deviceId = k.device_id;
  record.contextId = k.context_id;
  record.streamId = k.stream_id;
  record.gridX = k.grid[0];
  record.gridY = k.grid[1];
  record.gridZ = k.grid[2];
  record.blockX = k.block[0];
  record.blockY = k.block[1];
  record.blockZ = k.block[2];
  record.graphId = k.graph_id;
  record.graphNodeId = k.graph_node_id;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddMemcpy(const Memory& m) {
  CUpti_ActivityMemcpy6 record{};
  record.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  record.correlationId = m.correlation_id;
  record.start = m.start;
  record.end = m.end;
  record.bytes = m.bytes;
  record.deviceId = m.device_id;
  record.contextId = m.context_id;
  record.streamId = m.stream_id;
  record.graphId = m.graph_id;
  record.graphNodeId = m.graph_node_id;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddPeerMemcpy(const Memory& m) {
  CUpti_ActivityMemcpyPtoP4 record{};
  record.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  record.correlationId = m.correlation_id;
  record.start = m.start;
  record.end = m.end;
  record.bytes = m.bytes;
  record.deviceId = m.device_id;
  record.contextId = m.context_id;
  record.streamId = m.stream_id;
  record.graphId = m.graph_id;
  record.graphNodeId = m.graph_node_id;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddMemset(const Memory& m) {
  CUpti_ActivityMemset4 record{};
  record.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  record.correlationId = m.correlation_id;
  record.start = m.start;
  record.end = m.end;
  record.bytes = m.bytes;
  record.deviceId = m.device_id;
  record.contextId = m.context_id;
  record.streamId = m.stream_id;
  record.graphId = m.graph_id;
  record.graphNodeId = m.graph_node_id;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddDevice(const Device& d) {
  CUpti_ActivityDevice5 record{};
  record.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  record.id = d.id;
  record.name = d.name;
  record.numMultiprocessors = d.sm_count;
  record.globalMemorySize = d.memory_bytes;
  record.coreClockRate = d.clock_khz;
  record.computeCapabilityMajor = d.major;
  record.computeCapabilityMinor = d.minor;
  std::memcpy(record.uuid.bytes, d.uuid, sizeof d.uuid);
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddDriverApi(uint32_t correlation_id,
                                                           CUpti_CallbackId cbid) {
  CUpti_ActivityAPI record{};
  record.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  record.cbid = cbid;
  record.correlationId = correlation_id;
  record.start = 1;
  record.end = 2;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::AddExternalCorrelation(uint32_t correlation_id,
                                                                     uint64_t external_id) {
  CUpti_ActivityExternalCorrelation record{};
  record.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  record.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  record.externalId = external_id;
  record.correlationId = correlation_id;
  Append(record);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::DropTail(size_t bytes) {
  bytes_.resize(bytes >= bytes_.size() ? 0 : bytes_.size() - bytes);
  return *this;
}

ActivityBufferBuilder& ActivityBufferBuilder::ZeroTail(size_t bytes) {
  bytes_.resize(bytes_.size() + bytes, 0);
  return *this;
}

size_t ActivityBufferBuilder::CopyTo(uint8_t* buffer) const {
  if (!bytes_.empty()) std::memcpy(buffer, bytes_.data(), bytes_.size());
  return bytes_.size();
}

uint8_t* ActivityBufferBuilder::data() {
  aligned_.assign((bytes_.size() + 7) / 8 + 1, 0);
  auto* out = reinterpret_cast<uint8_t*>(aligned_.data());
  CopyTo(out);
  return out;
}

}  // namespace flopscope::injector::cupti::testing
