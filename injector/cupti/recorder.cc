#include "injector/cupti/recorder.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/json/json_writer.h"
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

// counterdata-NNNN.json: the pass's plan, its image files and its launches in ordinal order.
std::string PassJson(const Recorder::CounterPass& pass, const std::string& config_file,
                     const std::string& availability_file, const std::string& image_file) {
  JsonWriter json;
  json.BeginObject().Key("window_id").Uint(pass.window_id).Key("chip").String(pass.chip);
  json.Key("metric_set").Int(pass.metric_set).Key("passes").Uint(pass.passes);
  json.Key("metrics").BeginArray();
  for (const std::string& metric : *pass.metrics) json.String(metric);
  json.EndArray().Key("config_image").String(config_file);
  json.Key("availability_image").String(availability_file);
  json.Key("counter_data_image").String(image_file);
  json.Key("ranges_dropped").Uint(pass.ranges_dropped).Key("error").String(pass.error);
  json.Key("taint").String(pass.taint).Key("launches").BeginArray();
  for (const Recorder::CounterPass::Launch& launch : pass.launches) {
    json.BeginObject().Key("correlation_id").Uint(launch.correlation_id);
    json.Key("path_id").Uint(launch.path_id).Key("instance_id").Uint(launch.instance_id);
    json.Key("name_id").Uint(launch.name_id).Key("device_id").Uint(launch.device_id);
    json.Key("phase_path_id").Uint(launch.phase_path_id).Key("step").Int(launch.step);
    json.Key("graph").Bool(launch.graph).Key("ambiguous").Bool(launch.ambiguous).EndObject();
  }
  json.EndArray().EndObject();
  return json.Finish();
}

}  // namespace

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
      Device& facts = devices_[device->id];
      facts.name = device->name == nullptr ? "" : device->name;
      facts.compute_capability =
          device->computeCapabilityMajor * 10 + device->computeCapabilityMinor;
      facts.sm_count = device->numMultiprocessors;
      facts.global_memory_bytes = device->globalMemorySize;
      facts.core_clock_khz = device->coreClockRate;
    }
    const auto address = reinterpret_cast<uint64_t>(name);
    if (name != nullptr && written.insert(address).second) AppendName(address, name, &names);
  }
  return names;
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
    const std::string json = PassJson(pass, config_file, availability_file, image_file);
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
    Warn("recording stopped at " + std::to_string(bytes_) + " bytes in " + dir_ + ": " + name +
         " (" + std::to_string(size) + " bytes) would pass the cap of " +
         std::to_string(max_bytes_) + " bytes");
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
  JsonWriter json;
  json.BeginObject().Key("format").String("flopscope-gpu-recording");
  json.Key("version").Uint(kFormatVersion).Key("cupti_api_version").Uint(CUPTI_API_VERSION);
  json.Key("cupti_version").Uint(cupti_version_).Key("cupti_path").String(cupti_path_);
  json.Key("chips").BeginObject();
  for (const auto& [device, chip] : chips_) json.Key(std::to_string(device)).String(chip);
  json.EndObject().Key("devices").BeginArray();
  for (const auto& [id, device] : devices_) {
    json.BeginObject().Key("id").Uint(id).Key("name").String(device.name);
    json.Key("compute_capability").Uint(device.compute_capability);
    json.Key("sm_count").Uint(device.sm_count);
    json.Key("global_memory_bytes").Uint(device.global_memory_bytes);
    json.Key("core_clock_khz").Uint(device.core_clock_khz).EndObject();
  }
  json.EndArray().Key("activity_buffers").Uint(activity_buffers_);
  json.Key("counter_passes").Uint(counter_passes_).Key("truncated").Bool(truncated_).EndObject();
  const std::string text = json.Finish();
  // Through a temporary and a rename: a reader never sees half a manifest.
  const std::string path = dir_ + "/manifest.json";
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    Fail("cannot write " + path + ": " + std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
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
