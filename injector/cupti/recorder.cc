#include "injector/cupti/recorder.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "injector/warn.h"

namespace flopscope::injector::cupti {
namespace {

std::atomic<Recorder*> g_active{nullptr};

std::string Numbered(const char* stem, uint64_t n, const char* suffix) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%04llu%s", stem, static_cast<unsigned long long>(n), suffix);
  return name;
}

void AppendName(uint64_t address, const char* text, std::string* out) {
  const uint32_t length = static_cast<uint32_t>(std::strlen(text));
  out->append(reinterpret_cast<const char*>(&address), sizeof address);
  out->append(reinterpret_cast<const char*>(&length), sizeof length);
  out->append(text, length);
}

std::string DeviceJson(const CUpti_ActivityDevice5& device) {
  return "{\"id\": " + std::to_string(device.id) +
         ", \"name\": " + JsonQuote(device.name == nullptr ? "" : device.name) +
         ", \"compute_capability\": " +
         std::to_string(device.computeCapabilityMajor * 10 + device.computeCapabilityMinor) +
         ", \"sm_count\": " + std::to_string(device.numMultiprocessors) +
         ", \"global_memory_bytes\": " + std::to_string(device.globalMemorySize) +
         ", \"core_clock_khz\": " + std::to_string(device.coreClockRate) + "}";
}

}  // namespace

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Recorder* ActiveRecorder() { return g_active.load(std::memory_order_acquire); }
void SetActiveRecorder(Recorder* recorder) { g_active.store(recorder, std::memory_order_release); }

std::unique_ptr<Recorder> Recorder::Open(const std::string& dir, NextRecord next_record,
                                         std::string* error, uint64_t max_bytes) {
  if (dir.empty() || next_record == nullptr) {
    *error = "no recording directory";
    return nullptr;
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot create " + dir + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<Recorder> recorder(new Recorder(dir, next_record, max_bytes));
  MutexLock lock(&recorder->mutex_);
  // A fresh attribution log: a directory recorded into twice would mix two runs.
  if (!recorder->WriteFile("attribution.bin", "", 0) || !recorder->WriteManifest()) {
    *error = "cannot write into " + dir;
    return nullptr;
  }
  return recorder;
}

void Recorder::NoteCupti(uint32_t version, const std::string& path) noexcept {
  MutexLock lock(&mutex_);
  try {
    cupti_version_ = version;
    cupti_path_ = path;
    WriteManifest();
  } catch (...) {
    Fail("out of memory");
  }
}

void Recorder::NoteChip(uint32_t device, const std::string& chip) noexcept {
  MutexLock lock(&mutex_);
  try {
    if (chips_[device] == chip) return;
    chips_[device] = chip;
    WriteManifest();
  } catch (...) {
    Fail("out of memory");
  }
}

void Recorder::RecordActivityBuffer(const uint8_t* buffer, size_t valid_size) noexcept {
  MutexLock lock(&mutex_);
  if (failed_ || truncated_ || buffer == nullptr) return;
  try {
    const std::string names = NamesOf(buffer, valid_size);
    const uint64_t n = activity_buffers_;
    if (!WriteFile(Numbered("activity", n, ".bin"), buffer, valid_size) ||
        !WriteFile(Numbered("activity", n, ".names"), names.data(), names.size())) {
      return;
    }
    ++activity_buffers_;
    WriteManifest();
  } catch (...) {
    Fail("out of memory");
  }
}

void Recorder::RecordAttribution(const KernelRecord* records, size_t count) noexcept {
  MutexLock lock(&mutex_);
  if (failed_ || truncated_ || count == 0) return;
  try {
    std::vector<AttributionEntry> entries(count);
    for (size_t i = 0; i < count; ++i) {
      entries[i].correlation_id = records[i].correlation_id;
      entries[i].graph_node_id = records[i].graph_node_id;
      entries[i].path_id = records[i].path_id;
      entries[i].range_instance_id = records[i].range_instance_id;
      entries[i].kind = records[i].kind;
      entries[i].counted = records[i].counted ? 1 : 0;
    }
    WriteFile("attribution.bin", entries.data(), count * sizeof(AttributionEntry), true);
  } catch (...) {
    Fail("out of memory");
  }
}

std::string Recorder::NamesOf(const uint8_t* buffer, size_t valid_size) {
  std::string names;
  std::set<uint64_t> written;
  CUpti_Activity* record = nullptr;
  // The real iterator, on a copy's worth of read-only walking: it does not write the buffer.
  auto* bytes = const_cast<uint8_t*>(buffer);
  while (next_record_(bytes, valid_size, &record) == CUPTI_SUCCESS) {
    const char* name = nullptr;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      name = reinterpret_cast<const CUpti_ActivityKernel10*>(record)->name;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
      const auto* device = reinterpret_cast<const CUpti_ActivityDevice5*>(record);
      name = device->name;
      devices_[device->id] = DeviceJson(*device);
    }
    const auto address = reinterpret_cast<uint64_t>(name);
    if (name != nullptr && written.insert(address).second) AppendName(address, name, &names);
  }
  return names;
}

std::string LaunchJson(uint64_t correlation_id, uint64_t path_id, uint64_t instance_id,
                       uint32_t name_id, uint32_t device_id, uint64_t phase_path_id, int64_t step,
                       bool graph, bool ambiguous) {
  return "{\"correlation_id\": " + std::to_string(correlation_id) +
         ", \"path_id\": " + std::to_string(path_id) +
         ", \"instance_id\": " + std::to_string(instance_id) +
         ", \"name_id\": " + std::to_string(name_id) +
         ", \"device_id\": " + std::to_string(device_id) +
         ", \"phase_path_id\": " + std::to_string(phase_path_id) +
         ", \"step\": " + std::to_string(step) + ", \"graph\": " + (graph ? "true" : "false") +
         ", \"ambiguous\": " + (ambiguous ? "true" : "false") + "}";
}

std::string Recorder::ConfigFileFor(const CounterPass& pass, std::string* availability_file) {
  auto it = configs_.find(pass.plan_key);
  std::string number;
  if (it != configs_.end()) {
    number = it->second;
  } else {
    number = Numbered("", configs_.size(), "").substr(1);
    const std::vector<uint8_t> none;
    const std::vector<uint8_t>& config = pass.config_image ? *pass.config_image : none;
    const std::vector<uint8_t>& availability = pass.availability ? *pass.availability : none;
    if (!WriteFile("config-" + number + ".bin", config.data(), config.size()) ||
        !WriteFile("availability-" + number + ".bin", availability.data(), availability.size())) {
      return "";
    }
    configs_[pass.plan_key] = number;
  }
  *availability_file = "availability-" + number + ".bin";
  return "config-" + number + ".bin";
}

void Recorder::RecordCounterPass(const CounterPass& pass) noexcept {
  MutexLock lock(&mutex_);
  if (failed_ || truncated_ || pass.counter_data == nullptr || pass.metrics == nullptr) return;
  try {
    std::string availability_file;
    const std::string config_file = ConfigFileFor(pass, &availability_file);
    if (config_file.empty()) return;
    const std::string image_file = Numbered("counterdata", counter_passes_, ".bin");
    if (!WriteFile(image_file, pass.counter_data->data(), pass.counter_data->size())) return;
    std::string json = "{\n  \"window_id\": " + std::to_string(pass.window_id) +
                       ",\n  \"chip\": " + JsonQuote(pass.chip) +
                       ",\n  \"metric_set\": " + std::to_string(pass.metric_set) +
                       ",\n  \"passes\": " + std::to_string(pass.passes) + ",\n  \"metrics\": [";
    const char* separator = "";
    for (const std::string& metric : *pass.metrics) {
      json += separator + JsonQuote(metric);
      separator = ", ";
    }
    json += "],\n  \"config_image\": " + JsonQuote(config_file) +
            ",\n  \"availability_image\": " + JsonQuote(availability_file) +
            ",\n  \"counter_data_image\": " + JsonQuote(image_file) +
            ",\n  \"ranges_dropped\": " + std::to_string(pass.ranges_dropped) +
            ",\n  \"error\": " + JsonQuote(pass.error) +
            ",\n  \"taint\": " + JsonQuote(pass.taint) + ",\n  \"launches\": [";
    separator = "\n    ";
    for (const std::string& launch : pass.launches) {
      json += separator + launch;
      separator = ",\n    ";
    }
    json += "]\n}\n";
    if (!WriteFile(Numbered("counterdata", counter_passes_, ".json"), json.data(), json.size())) {
      return;
    }
    ++counter_passes_;
    WriteManifest();
  } catch (...) {
    Fail("out of memory");
  }
}

bool Recorder::WriteFile(const std::string& name, const void* bytes, size_t size, bool append) {
  if (failed_ || truncated_) return false;
  if (bytes_ + size > max_bytes_) {
    truncated_ = true;
    Warn("recording stopped at " + std::to_string(bytes_) + " bytes in " + dir_);
    WriteManifest();
    return false;
  }
  const std::string path = dir_ + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (file == nullptr) {
    Fail("cannot write " + path + ": " + std::strerror(errno));
    return false;
  }
  const bool ok = (size == 0 || std::fwrite(bytes, 1, size, file) == size);
  if (std::fclose(file) != 0 || !ok) {
    Fail("cannot write " + path);
    return false;
  }
  bytes_ += size;
  return true;
}

bool Recorder::WriteManifest() {
  if (failed_) return false;
  std::string json = "{\n  \"format\": \"flopscope-gpu-recording\",\n  \"version\": " +
                     std::to_string(kFormatVersion) +
                     ",\n  \"cupti_api_version\": " + std::to_string(CUPTI_API_VERSION) +
                     ",\n  \"cupti_version\": " + std::to_string(cupti_version_) +
                     ",\n  \"cupti_path\": " + JsonQuote(cupti_path_) + ",\n  \"chips\": {";
  const char* separator = "";
  for (const auto& [device, chip] : chips_) {
    json += std::string(separator) + JsonQuote(std::to_string(device)) + ": " + JsonQuote(chip);
    separator = ", ";
  }
  json += "},\n  \"devices\": [";
  separator = "";
  for (const auto& [id, device] : devices_) {
    json += separator + device;
    separator = ", ";
  }
  json += "],\n  \"activity_buffers\": " + std::to_string(activity_buffers_) +
          ",\n  \"counter_passes\": " + std::to_string(counter_passes_) +
          ",\n  \"truncated\": " + (truncated_ ? "true" : "false") + "\n}\n";
  // Through a temporary and a rename: a reader never sees half a manifest.
  const std::string path = dir_ + "/manifest.json";
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    Fail("cannot write " + path + ": " + std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  if (std::fclose(file) != 0 || !ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    Fail("cannot write " + path);
    return false;
  }
  return true;
}

void Recorder::Fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  Warn("recording into " + dir_ + " stopped: " + what);
}

}  // namespace flopscope::injector::cupti
