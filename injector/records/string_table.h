#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace flopscope::injector {

struct StringDefinition {
  uint32_t id = 0;
  std::string value;
};

// Interns kernel names (flopscope.v1.StringDef): text -> id from 1. Like PathTable, each new
// string is queued once for export and never dropped.
class StringTable {
 public:
  static constexpr size_t kDefaultMaxStrings = 1000000;
  static constexpr size_t kMaxStringBytes = 4096;

  explicit StringTable(size_t max_strings = kDefaultMaxStrings) : max_strings_(max_strings) {}
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;

  // Returns the id, or 0 when the table is full. Any bytes: repaired to UTF-8 and truncated.
  uint32_t Intern(std::string_view raw_value) FS_EXCLUDES(mutex_);
  void TakeNewDefinitions(std::vector<StringDefinition>* out) FS_EXCLUDES(mutex_);

 private:
  const size_t max_strings_;
  // Guards everything below; taken once per kernel launch at most (next issue: per launch
  // callback), never on the NVTX path.
  Mutex mutex_;
  std::unordered_map<std::string, uint32_t> ids_ FS_GUARDED_BY(mutex_);
  std::vector<StringDefinition> unexported_ FS_GUARDED_BY(mutex_);
};

}  // namespace flopscope::injector
