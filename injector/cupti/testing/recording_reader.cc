#include "injector/cupti/testing/recording_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <unordered_map>

namespace flopscope::injector::cupti::testing {
namespace {

namespace fs = std::filesystem;

bool ReadBytes(const fs::path& path, std::vector<uint8_t>* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path.string();
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// activity-NNNN.names: {u64 address, u32 length, bytes} repeated.
bool ReadNames(const fs::path& path, std::deque<std::string>* storage,
               std::unordered_map<uint64_t, const char*>* names, std::string* error) {
  std::vector<uint8_t> bytes;
  if (!ReadBytes(path, &bytes, error)) return false;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t address = 0;
    uint32_t length = 0;
    if (bytes.size() - at < sizeof address + sizeof length) break;
    std::memcpy(&address, bytes.data() + at, sizeof address);
    std::memcpy(&length, bytes.data() + at + sizeof address, sizeof length);
    at += sizeof address + sizeof length;
    if (bytes.size() - at < length) break;
    storage->emplace_back(reinterpret_cast<const char*>(bytes.data() + at), length);
    (*names)[address] = storage->back().c_str();
    at += length;
  }
  if (at != bytes.size()) {
    *error = path.string() + " is truncated";
    return false;
  }
  return true;
}

// Points each kernel's and device's name at the recorded string; clears the pointers the
// recording process's memory gave meaning to and nothing here reads.
bool RewriteNames(decltype(&::cuptiActivityGetNextRecord) next_record, Recording::Buffer* buffer,
                  const std::unordered_map<uint64_t, const char*>& names, std::string* error) {
  CUpti_Activity* record = nullptr;
  auto lookup = [&](const char** name) {
    if (*name == nullptr) return true;
    auto it = names.find(reinterpret_cast<uint64_t>(*name));
    if (it == names.end()) return false;
    *name = it->second;
    return true;
  };
  while (next_record(buffer->data(), buffer->size, &record) == CUPTI_SUCCESS) {
    bool found = true;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* kernel = reinterpret_cast<CUpti_ActivityKernel10*>(record);
      found = lookup(&kernel->name);
      kernel->reserved0 = nullptr;
      kernel->pAccessPolicyWindow = nullptr;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
      found = lookup(&reinterpret_cast<CUpti_ActivityDevice5*>(record)->name);
    }
    if (!found) {
      *error = buffer->file + ": a record's name was not recorded";
      return false;
    }
  }
  return true;
}

bool LoadManifest(const fs::path& dir, Recording* out, std::string* error) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const std::string path = (dir / "manifest.json").string();
  uint64_t version = 0, cupti = 0;
  simdjson::dom::object chips;
  simdjson::dom::array devices;
  if (parser.load(path).get(root) != simdjson::SUCCESS ||
      root["version"].get_uint64().get(version) != simdjson::SUCCESS ||
      root["cupti_version"].get_uint64().get(cupti) != simdjson::SUCCESS ||
      root["chips"].get_object().get(chips) != simdjson::SUCCESS ||
      root["devices"].get_array().get(devices) != simdjson::SUCCESS ||
      root["truncated"].get_bool().get(out->truncated) != simdjson::SUCCESS) {
    *error = path + " is missing or malformed";
    return false;
  }
  out->format_version = static_cast<uint32_t>(version);
  out->cupti_version = static_cast<uint32_t>(cupti);
  for (auto [device, chip] : chips) {
    std::string_view name;
    if (chip.get_string().get(name) != simdjson::SUCCESS) continue;
    out->chips[static_cast<uint32_t>(std::stoul(std::string(device)))] = std::string(name);
  }
  out->devices = devices.size();
  return true;
}

bool LoadActivity(const fs::path& dir, decltype(&::cuptiActivityGetNextRecord) next_record,
                  Recording* out, std::string* error) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("activity-", 0) == 0 && entry.path().extension() == ".bin") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    Recording::Buffer buffer;
    buffer.file = file.string();
    std::vector<uint8_t> bytes;
    if (!ReadBytes(file, &bytes, error)) return false;
    buffer.size = bytes.size();
    buffer.storage.assign((bytes.size() + 7) / 8, 0);
    std::memcpy(buffer.storage.data(), bytes.data(), bytes.size());
    std::unordered_map<uint64_t, const char*> names;
    fs::path names_file = file;
    names_file.replace_extension(".names");
    if (!ReadNames(names_file, &out->names, &names, error) ||
        !RewriteNames(next_record, &buffer, names, error)) {
      return false;
    }
    out->buffers.push_back(std::move(buffer));
  }
  std::vector<uint8_t> log;
  if (!ReadBytes(dir / "attribution.bin", &log, error)) return false;
  if (log.size() % sizeof(Recorder::AttributionEntry) != 0) {
    *error = "attribution.bin is truncated";
    return false;
  }
  out->attribution.resize(log.size() / sizeof(Recorder::AttributionEntry));
  if (!log.empty()) std::memcpy(out->attribution.data(), log.data(), log.size());
  return true;
}

template <typename T>
T Get(simdjson::dom::element element, const char* key, T fallback) {
  T value{};
  return element[key].get(value) == simdjson::SUCCESS ? value : fallback;
}

LaunchEntry LaunchFrom(simdjson::dom::element launch) {
  LaunchEntry entry;
  entry.mark.correlation_id = Get<uint64_t>(launch, "correlation_id", 0);
  entry.mark.path_id = Get<uint64_t>(launch, "path_id", 0);
  entry.mark.instance_id = Get<uint64_t>(launch, "instance_id", 0);
  entry.mark.name_id = static_cast<uint32_t>(Get<uint64_t>(launch, "name_id", 0));
  entry.mark.device_id = static_cast<uint32_t>(Get<uint64_t>(launch, "device_id", 0));
  entry.mark.phase_path_id = Get<uint64_t>(launch, "phase_path_id", 0);
  entry.mark.step = Get<int64_t>(launch, "step", -1);
  entry.graph = Get<bool>(launch, "graph", false);
  entry.ambiguous = Get<bool>(launch, "ambiguous", false);
  return entry;
}

bool LoadCounterPass(const fs::path& json, Recording* out, std::string* error) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::array metrics, launches;
  std::string_view chip, config, availability, image, failure, taint;
  if (parser.load(json.string()).get(root) != simdjson::SUCCESS ||
      root["chip"].get_string().get(chip) != simdjson::SUCCESS ||
      root["metrics"].get_array().get(metrics) != simdjson::SUCCESS ||
      root["launches"].get_array().get(launches) != simdjson::SUCCESS ||
      root["config_image"].get_string().get(config) != simdjson::SUCCESS ||
      root["availability_image"].get_string().get(availability) != simdjson::SUCCESS ||
      root["counter_data_image"].get_string().get(image) != simdjson::SUCCESS ||
      root["error"].get_string().get(failure) != simdjson::SUCCESS ||
      root["taint"].get_string().get(taint) != simdjson::SUCCESS) {
    *error = json.string() + " is malformed";
    return false;
  }
  auto plan = std::make_shared<CounterPlan>();
  plan->chip = std::string(chip);
  plan->metric_set = static_cast<counters::MetricSetKind>(Get<int64_t>(root, "metric_set", 0));
  plan->passes = static_cast<uint32_t>(Get<uint64_t>(root, "passes", 0));
  for (simdjson::dom::element metric : metrics) {
    std::string_view name;
    if (metric.get_string().get(name) == simdjson::SUCCESS) plan->metrics.emplace_back(name);
  }
  const fs::path dir = json.parent_path();
  FlushedPass pass;
  if (!ReadBytes(dir / std::string(config), &plan->config_image, error) ||
      !ReadBytes(dir / std::string(availability), &plan->availability, error) ||
      !ReadBytes(dir / std::string(image), &pass.data.image, error)) {
    return false;
  }
  pass.window_id = Get<uint64_t>(root, "window_id", 0);
  pass.plan = std::move(plan);
  pass.data.dropped = Get<uint64_t>(root, "ranges_dropped", 0);
  pass.error = std::string(failure);
  pass.launches.taint = std::string(taint);
  for (simdjson::dom::element launch : launches)
    pass.launches.entries.push_back(LaunchFrom(launch));
  out->counter_passes.push_back(std::move(pass));
  return true;
}

}  // namespace

bool LoadRecording(const std::string& dir, decltype(&::cuptiActivityGetNextRecord) next_record,
                   Recording* out, std::string* error) {
  out->dir = dir;
  if (!LoadManifest(dir, out, error) || !LoadActivity(dir, next_record, out, error)) return false;
  std::vector<fs::path> passes;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("counterdata-", 0) == 0 && entry.path().extension() == ".json") {
      passes.push_back(entry.path());
    }
  }
  std::sort(passes.begin(), passes.end());
  for (const fs::path& json : passes) {
    if (!LoadCounterPass(json, out, error)) return false;
  }
  return true;
}

std::vector<std::string> FindRecordings(const std::string& root) {
  std::vector<std::string> found;
  std::error_code ignored;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ignored)) {
    if (entry.is_directory() && fs::exists(entry.path() / "manifest.json")) {
      found.push_back(entry.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace flopscope::injector::cupti::testing
