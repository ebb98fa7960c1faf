#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "injector/kernel_api.h"

namespace flopscope::injector::cupti {

// Writes what the GPU really produced into a directory the test suite can replay
// (FLOPSCOPE_RECORD_DIR; the format is tests/data/gpu/README.md):
//
//   manifest.json            CUPTI version and path, chips, device facts, counts
//   activity-NNNN.bin        one completed activity buffer, its first validSize bytes, as
//                            CUPTI handed it (before flopscope parsed it)
//   activity-NNNN.names      the strings its records point at (kernel and device names live
//                            in CUPTI's memory, not in the buffer): {u64 address, u32 length,
//                            bytes} repeated
//   attribution.bin          what the live joiner made of each record (AttributionEntry)
//   counterdata-NNNN.bin     one decoded counter data image, as the range profiler left it
//   counterdata-NNNN.json    its plan (chip, metrics, passes, config and availability image
//                            files) and the launches of its pass, in ordinal order
//   config-NNNN.bin, availability-NNNN.bin   each plan's images, written once
//
// Recording stops (and the manifest says "truncated") after kMaxBytes. Thread-safe. Every
// method but Open is noexcept; a write failure is reported once on stderr (injector::Warn), then
// nothing more is recorded. A debug mode: its mutex is held across file writes, on CUPTI's buffer
// thread among others, and no CUPTI call is made under it (NextRecord only walks bytes).
class Recorder {
 public:
  using NextRecord = decltype(&::cuptiActivityGetNextRecord);
  static constexpr uint64_t kMaxBytes = 256ull << 20;
  static constexpr uint32_t kFormatVersion = 1;

  // One joined record: {correlation id, graph node id, path id, instance id, kind, counted}.
  struct AttributionEntry {
    uint64_t correlation_id = 0;
    uint64_t graph_node_id = 0;
    uint64_t path_id = 0;
    uint64_t range_instance_id = 0;
    uint32_t kind = 0;
    uint32_t counted = 0;
  };
  static_assert(sizeof(AttributionEntry) == 40, "attribution.bin's entry is 40 bytes");

  // Creates `dir` when missing (not its parents); null with `error` when it cannot be written.
  // `next_record` walks buffers to find the strings their records point at.
  // `max_bytes`: where recording stops (tests make it small).
  static std::unique_ptr<Recorder> Open(const std::string& dir, NextRecord next_record,
                                        std::string* error, uint64_t max_bytes = kMaxBytes);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void NoteCupti(uint32_t version, const std::string& path) noexcept FS_EXCLUDES(mutex_);
  void NoteChip(uint32_t device, const std::string& chip) noexcept FS_EXCLUDES(mutex_);
  void RecordActivityBuffer(const uint8_t* buffer, size_t valid_size) noexcept FS_EXCLUDES(mutex_);
  void RecordAttribution(const KernelRecord* records, size_t count) noexcept FS_EXCLUDES(mutex_);

  // One counter pass in plain data, so that the recorder needs none of the counter windows'
  // types (RecordPass below builds it from their FlushedPass).
  struct CounterPass {
    const void* plan_key = nullptr;  // one config file per plan
    uint64_t window_id = 0;
    std::string chip;
    int metric_set = 0;
    uint32_t passes = 0;
    const std::vector<std::string>* metrics = nullptr;
    const std::vector<uint8_t>* config_image = nullptr;
    const std::vector<uint8_t>* availability = nullptr;
    const std::vector<uint8_t>* counter_data = nullptr;
    size_t ranges_dropped = 0;
    std::string error, taint;
    struct Launch {
      uint64_t correlation_id = 0, path_id = 0, instance_id = 0, phase_path_id = 0;
      uint32_t name_id = 0, device_id = 0;
      int64_t step = 0;
      bool graph = false, ambiguous = false;
    };
    std::vector<Launch> launches;  // in ordinal order
  };
  void RecordCounterPass(const CounterPass& pass) noexcept FS_EXCLUDES(mutex_);
  // The counter windows' call site: a FlushedPass (counter_windows/pass_evaluator.h).
  template <typename Flushed>
  void RecordPass(const Flushed& flushed) noexcept;

  const std::string& dir() const { return dir_; }

 private:
  Recorder(std::string dir, NextRecord next_record, uint64_t max_bytes)
      : dir_(std::move(dir)), next_record_(next_record), max_bytes_(max_bytes) {}
  // Writes `bytes` to dir_/name; false (and recording stops) on failure or past kMaxBytes.
  bool WriteFile(const std::string& name, const void* bytes, size_t size, bool append = false)
      FS_REQUIRES(mutex_);
  bool WriteManifest() FS_REQUIRES(mutex_);
  void Fail(const std::string& what) FS_REQUIRES(mutex_);
  // The names file of one buffer, and its DEVICE records' facts into devices_.
  std::string NamesOf(const uint8_t* buffer, size_t valid_size) FS_REQUIRES(mutex_);
  // The config and availability files of `pass`'s plan, written on first use; "" on failure.
  std::string ConfigFileFor(const CounterPass& pass, std::string* availability_file)
      FS_REQUIRES(mutex_);

  const std::string dir_;
  const NextRecord next_record_;
  const uint64_t max_bytes_;
  Mutex mutex_;  // guards everything below; held across file writes (recording is a debug mode)
  bool failed_ FS_GUARDED_BY(mutex_) = false;
  bool truncated_ FS_GUARDED_BY(mutex_) = false;
  uint64_t bytes_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t activity_buffers_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t counter_passes_ FS_GUARDED_BY(mutex_) = 0;
  uint32_t cupti_version_ FS_GUARDED_BY(mutex_) = 0;
  std::string cupti_path_ FS_GUARDED_BY(mutex_);
  std::map<uint32_t, std::string> chips_ FS_GUARDED_BY(mutex_);
  // A DEVICE record's facts, as manifest.json lists them.
  struct Device {
    std::string name;
    uint32_t compute_capability = 0, sm_count = 0, core_clock_khz = 0;
    uint64_t global_memory_bytes = 0;
  };
  std::map<uint32_t, Device> devices_ FS_GUARDED_BY(mutex_);
  std::map<const void*, std::string> configs_ FS_GUARDED_BY(mutex_);  // plan -> "NNNN"
};

// The process's recorder, for the counter windows' one call site; null when not recording.
Recorder* ActiveRecorder();
void SetActiveRecorder(Recorder* recorder);

template <typename Flushed>
void Recorder::RecordPass(const Flushed& flushed) noexcept {
  if (flushed.plan == nullptr) return;
  try {
    CounterPass pass;
    pass.plan_key = flushed.plan.get();
    pass.window_id = flushed.window_id;
    pass.chip = flushed.plan->chip;
    pass.metric_set = static_cast<int>(flushed.plan->metric_set);
    pass.passes = flushed.plan->passes;
    pass.metrics = &flushed.plan->metrics;
    pass.config_image = &flushed.plan->config_image;
    pass.availability = &flushed.plan->availability;
    pass.counter_data = &flushed.data.image;
    pass.ranges_dropped = flushed.data.dropped;
    pass.error = flushed.error;
    pass.taint = flushed.launches.taint;
    for (const auto& entry : flushed.launches.entries) {
      CounterPass::Launch& launch = pass.launches.emplace_back();
      launch.correlation_id = entry.mark.correlation_id;
      launch.path_id = entry.mark.path_id;
      launch.instance_id = entry.mark.instance_id;
      launch.name_id = entry.mark.name_id;
      launch.device_id = entry.mark.device_id;
      launch.phase_path_id = entry.mark.phase_path_id;
      launch.step = entry.mark.step;
      launch.graph = entry.graph;
      launch.ambiguous = entry.ambiguous;
    }
    RecordCounterPass(pass);
  } catch (...) {
    // Out of memory: this pass is not recorded; the profiling goes on.
  }
}

}  // namespace flopscope::injector::cupti
