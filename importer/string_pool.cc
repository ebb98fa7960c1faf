#include "importer/string_pool.h"

namespace flopscope::importer {

uint32_t StringPool::Intern(absl::string_view text) {
  const auto found = ids_.find(text);
  if (found != ids_.end()) return found->second;
  const uint32_t id = static_cast<uint32_t>(values_.size());
  values_.emplace_back(text);
  ids_.emplace(values_.back(), id);
  return id;
}

}  // namespace flopscope::importer
