#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/pass_evaluator.h"
#include "injector/cupti/recorder.h"

namespace flopscope::injector::cupti::testing {

// A recording directory (injector/cupti/recorder.h, tests/data/gpu/README.md) loaded for replay.
struct Recording {
  // One activity buffer, ready for cuptiActivityGetNextRecord: 8-byte-aligned storage, and the
  // name pointers of its records rewritten to point at `names` (the recorded addresses were the
  // recording process's).
  struct Buffer {
    std::string file;
    std::vector<uint64_t> storage;
    size_t size = 0;
    uint8_t* data() { return reinterpret_cast<uint8_t*>(storage.data()); }
  };

  std::string dir;
  uint32_t format_version = 0;
  uint32_t cupti_version = 0;
  std::map<uint32_t, std::string> chips;
  size_t devices = 0;
  bool truncated = false;
  std::vector<Buffer> buffers;
  std::deque<std::string> names;  // stable storage the buffers' name pointers point into
  std::vector<Recorder::AttributionEntry> attribution;
  std::vector<FlushedPass> counter_passes;
};

// Reads `dir` into `out`. `next_record` walks the buffers to rewrite their name pointers. False
// with `error` naming the file when a file is missing or malformed, or a record's name was not
// recorded.
bool LoadRecording(const std::string& dir, decltype(&::cuptiActivityGetNextRecord) next_record,
                   Recording* out, std::string* error);

// The recording directories under `root` (each sub-directory holding a manifest.json), sorted.
std::vector<std::string> FindRecordings(const std::string& root);

}  // namespace flopscope::injector::cupti::testing
