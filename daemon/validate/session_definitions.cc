#include "daemon/validate/session_definitions.h"

#include <tuple>

#include "absl/hash/hash.h"

namespace flopscope::daemon {

const PathDefinition* SessionDefinitions::FindPath(uint64_t id) const {
  auto it = paths_.find(id);
  return it == paths_.end() ? nullptr : &it->second;
}

const size_t* SessionDefinitions::FindString(uint32_t id) const {
  auto it = strings_.find(id);
  return it == strings_.end() ? nullptr : &it->second;
}

void SessionDefinitions::AddPath(uint64_t id, uint64_t parent_id, uint32_t parent_depth,
                                 absl::string_view domain, absl::string_view name) {
  paths_[id] = PathDefinition{parent_id, parent_depth + 1, PathDigest(parent_id, domain, name)};
}

void SessionDefinitions::AddString(uint32_t id, absl::string_view value) {
  strings_[id] = StringDigest(value);
}

void SessionDefinitions::Merge(const SessionDefinitions& other) {
  paths_.insert(other.paths_.begin(), other.paths_.end());
  strings_.insert(other.strings_.begin(), other.strings_.end());
}

void SessionDefinitions::Clear() {
  paths_.clear();
  strings_.clear();
}

size_t SessionDefinitions::PathDigest(uint64_t parent_id, absl::string_view domain,
                                      absl::string_view name) {
  return absl::Hash<std::tuple<uint64_t, absl::string_view, absl::string_view>>{}(
      std::make_tuple(parent_id, domain, name));
}

size_t SessionDefinitions::StringDigest(absl::string_view value) {
  return absl::Hash<absl::string_view>{}(value);
}

}  // namespace flopscope::daemon
