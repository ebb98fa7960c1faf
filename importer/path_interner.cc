#include "importer/path_interner.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace flopscope::importer {

uint64_t PathInterner::Intern(uint64_t parent_id, absl::string_view domain,
                              absl::string_view name) {
  Key key(parent_id, std::string(domain), std::string(name));
  const auto found = ids_.find(key);
  if (found != ids_.end()) return found->second;
  const uint64_t id = paths_.size() + 1;
  v1::RangePath& path = paths_.emplace_back();
  path.set_id(id);
  path.set_parent_id(parent_id);
  path.set_domain(std::string(domain));
  path.set_name(std::string(name));
  ids_.emplace(std::move(key), id);
  return id;
}

std::string PathInterner::FullName(uint64_t id) const {
  std::vector<absl::string_view> names;
  while (id != 0 && id <= paths_.size()) {
    const v1::RangePath& path = paths_[id - 1];
    names.push_back(path.name());
    id = path.parent_id();
  }
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, "/");
}

}  // namespace flopscope::importer
