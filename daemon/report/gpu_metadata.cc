#include "daemon/report/gpu_metadata.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace flopscope::daemon {
namespace {

constexpr char kGpuPrefix[] = "gpu.";

template <typename Int>
void SetNumber(const std::string& text, Int* out) {
  Int value = 0;
  if (absl::SimpleAtoi(text, &value)) *out = value;
}

void SetField(const std::string& field, const std::string& value, v1::Device* device) {
  if (field == "name") {
    device->set_name(value);
  } else if (field == "chip") {
    device->set_chip(value);
  } else if (field == "uuid") {
    device->set_uuid(value);
  } else {
    uint64_t number = 0;
    if (!absl::SimpleAtoi(value, &number)) return;
    if (field == "sm_count") device->set_sm_count(static_cast<uint32_t>(number));
    if (field == "sm_clock_khz") device->set_sm_clock_khz(static_cast<uint32_t>(number));
    if (field == "memory_bytes") device->set_memory_bytes(number);
    if (field == "compute_capability") {
      device->set_compute_capability(static_cast<uint32_t>(number));
    }
  }
}

v1::Device* DeviceWithIndex(uint32_t index, v1::RankInfo* rank) {
  for (v1::Device& device : *rank->mutable_devices()) {
    if (device.index() == index) return &device;
  }
  v1::Device* device = rank->add_devices();
  device->set_index(index);
  return device;
}

}  // namespace

bool IsInjectorGpuKey(const std::string& key) {
  return absl::StartsWith(key, kGpuPrefix) || key == kLaunchNotSeenKey;
}

void ApplyGpuMetadata(const std::vector<v1::Metadata>& metadata, v1::RankInfo* rank) {
  std::map<uint32_t, std::map<std::string, std::string>> devices;  // index -> field -> value
  for (const v1::Metadata& entry : metadata) {
    if (entry.key() == kGpuStatusKey) {
      rank->set_gpu_status(entry.value());  // in arrival order: the last one wins
      continue;
    }
    if (!absl::StartsWith(entry.key(), kGpuPrefix)) continue;
    const std::vector<std::string> parts = absl::StrSplit(entry.key(), absl::MaxSplits('.', 2));
    uint32_t index = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &index)) continue;
    devices[index][parts[2]] = entry.value();
  }
  for (const auto& [index, fields] : devices) {
    v1::Device* device = DeviceWithIndex(index, rank);
    for (const auto& [field, value] : fields) SetField(field, value, device);
  }
}

}  // namespace flopscope::daemon
