#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::importer {

// Range paths as the injector interns them: each distinct (parent id, domain, name) is one
// RangePath id, from 1 up, a parent always before its children. Id 0 is the root.
class PathInterner {
 public:
  uint64_t Intern(uint64_t parent_id, absl::string_view domain, absl::string_view name);

  // Every path so far, in id order (paths()[i].id() == i + 1).
  const std::vector<v1::RangePath>& paths() const { return paths_; }
  // "Model_0/Layer_1/Linear_3": names from the root joined by '/'.
  std::string FullName(uint64_t id) const;

 private:
  using Key = std::tuple<uint64_t, std::string, std::string>;
  std::vector<v1::RangePath> paths_;
  absl::flat_hash_map<Key, uint64_t> ids_;
};

}  // namespace flopscope::importer
