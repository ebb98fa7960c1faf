#include "injector/cupti/device_catalog.h"

namespace flopscope::injector::cupti {
namespace {

std::string Key(uint32_t device_id, const char* field) {
  return "gpu." + std::to_string(device_id) + "." + field;
}

}  // namespace

void DeviceCatalog::AddDevice(const DeviceFacts& facts, std::vector<MetadataPair>* out) {
  {
    MutexLock lock(&mutex_);
    if (!described_.insert(facts.id).second) return;
  }
  out->emplace_back(Key(facts.id, "name"), facts.name);
  out->emplace_back(Key(facts.id, "sm_count"), std::to_string(facts.sm_count));
  out->emplace_back(Key(facts.id, "sm_clock_khz"), std::to_string(facts.sm_clock_khz));
  out->emplace_back(Key(facts.id, "memory_bytes"), std::to_string(facts.memory_bytes));
  out->emplace_back(Key(facts.id, "compute_capability"), std::to_string(facts.compute_capability));
  out->emplace_back(Key(facts.id, "uuid"), facts.uuid);
}

void DeviceCatalog::AddChip(uint32_t device_id, const std::string& chip,
                            std::vector<MetadataPair>* out) {
  if (chip.empty()) return;
  {
    MutexLock lock(&mutex_);
    if (!chip_known_.insert(device_id).second) return;
  }
  out->emplace_back(Key(device_id, "chip"), chip);
}

}  // namespace flopscope::injector::cupti
