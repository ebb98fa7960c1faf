#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "injector/cupti/activity_parser.h"

namespace flopscope::injector::cupti {

using MetadataPair = std::pair<std::string, std::string>;

// Turns what CUPTI says about devices into metadata the daemon reads back as
// flopscope.v1.Device (keys `gpu.<id>.name`, `.chip`, `.sm_count`, `.sm_clock_khz`,
// `.memory_bytes`, `.compute_capability`, `.uuid`). Each fact is announced once per device: the
// properties when CUPTI's DEVICE record arrives, the chip when a context on the device is created
// (cuptiDeviceGetChipName needs the device index, which the context callback gives).
//
// Thread-safe: devices appear from the buffer thread and from context callbacks.
class DeviceCatalog {
 public:
  // Appends the metadata for facts not announced before.
  void AddDevice(const DeviceFacts& facts, std::vector<MetadataPair>* out);
  void AddChip(uint32_t device_id, const std::string& chip, std::vector<MetadataPair>* out);

 private:
  // Guards the two sets; held only while they are read or changed.
  Mutex mutex_;
  std::set<uint32_t> described_ FS_GUARDED_BY(mutex_);
  std::set<uint32_t> chip_known_ FS_GUARDED_BY(mutex_);
};

}  // namespace flopscope::injector::cupti
