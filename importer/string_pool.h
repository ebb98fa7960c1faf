#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace flopscope::importer {

// Interns the names of one recording (kernel names repeat thousands of times): id 0 is always the
// empty string, ids are dense and stable. Not thread-safe; one reader fills it.
class StringPool {
 public:
  StringPool() { Intern(""); }

  uint32_t Intern(absl::string_view text);
  const std::string& Get(uint32_t id) const { return values_[id]; }
  size_t size() const { return values_.size(); }

 private:
  std::vector<std::string> values_;
  absl::flat_hash_map<std::string, uint32_t> ids_;
};

}  // namespace flopscope::importer
