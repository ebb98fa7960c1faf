#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace flopscope::injector::cupti::testing {

// Lays out CUPTI activity records back to back, 8-byte aligned, exactly as CUPTI fills a buffer,
// so tests can feed them to the real cuptiActivityGetNextRecord (no GPU or driver involved).
class ActivityBufferBuilder {
 public:
  struct Kernel {
    uint32_t correlation_id = 0;
    uint64_t start = 0, end = 0;
    const char* name = "kernel";
    uint32_t device_id = 0, context_id = 1, stream_id = 7;
    int32_t grid[3] = {1, 1, 1};
    int32_t block[3] = {1, 1, 1};
    uint32_t graph_id = 0;
    uint64_t graph_node_id = 0;
  };
  struct Memory {
    uint32_t correlation_id = 0;
    uint64_t start = 0, end = 0;
    uint64_t bytes = 0;
    uint32_t device_id = 0, context_id = 1, stream_id = 7;
    uint32_t graph_id = 0;
    uint64_t graph_node_id = 0;
  };
  struct Device {
    uint32_t id = 0;
    const char* name = "NVIDIA Test GPU";
    uint32_t sm_count = 0;
    uint64_t memory_bytes = 0;
    uint32_t clock_khz = 0;
    uint32_t major = 0, minor = 0;
    unsigned char uuid[16] = {};
  };

  ActivityBufferBuilder& AddKernel(const Kernel& kernel,
                                   CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ActivityBufferBuilder& AddMemcpy(const Memory& copy);
  ActivityBufferBuilder& AddPeerMemcpy(const Memory& copy);
  ActivityBufferBuilder& AddMemset(const Memory& set);
  ActivityBufferBuilder& AddDevice(const Device& device);
  // Records the tracer does not use, mixed in as CUPTI would when other kinds are on.
  ActivityBufferBuilder& AddDriverApi(uint32_t correlation_id, CUpti_CallbackId cbid);
  ActivityBufferBuilder& AddExternalCorrelation(uint32_t correlation_id, uint64_t external_id);

  // Cuts the last `bytes` off (a record cut short).
  ActivityBufferBuilder& DropTail(size_t bytes);
  // Appends `bytes` zero bytes (a zero-filled tail).
  ActivityBufferBuilder& ZeroTail(size_t bytes);

  // Copies the records into `buffer` (at least size() bytes, 8-byte aligned); returns size().
  size_t CopyTo(uint8_t* buffer) const;
  size_t size() const { return bytes_.size(); }
  // The bytes in 8-byte-aligned storage owned by the builder.
  uint8_t* data();

 private:
  template <typename Record>
  void Append(const Record& record) {
    const size_t offset = bytes_.size();
    bytes_.resize(offset + sizeof(Record));
    std::memcpy(bytes_.data() + offset, &record, sizeof(Record));
  }

  std::vector<uint8_t> bytes_;
  std::vector<uint64_t> aligned_;  // backs data()
};

}  // namespace flopscope::injector::cupti::testing
