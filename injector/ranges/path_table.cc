#include "injector/ranges/path_table.h"

#include <cstring>

#include "common/utf8.h"

namespace flopscope::injector {
namespace {

std::string CleanName(std::string_view raw_name) {
  std::string name;
  AppendSanitizedUtf8(raw_name.substr(0, PathTable::kMaxNameBytes + 4), &name);
  TruncateUtf8(PathTable::kMaxNameBytes, &name);
  if (name.empty()) name = "(unnamed)";
  return name;
}

// Fixed-width binary prefix, so no choice of name can collide with another key.
std::string MakeKey(uint64_t parent_id, uint32_t domain_id, const std::string& name) {
  std::string key(sizeof parent_id + sizeof domain_id, '\0');
  std::memcpy(key.data(), &parent_id, sizeof parent_id);
  std::memcpy(key.data() + sizeof parent_id, &domain_id, sizeof domain_id);
  key.append(name);
  return key;
}

}  // namespace

uint64_t PathTable::Intern(uint64_t parent_id, const Domain* domain, std::string_view raw_name) {
  std::string name = CleanName(raw_name);
  std::string key = MakeKey(parent_id, domain->id, name);
  MutexLock lock(&mutex_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (ids_.size() >= max_paths_) return 0;
  const uint64_t id = next_id_++;
  ids_.emplace(std::move(key), id);
  unexported_.push_back(PathDefinition{id, parent_id, domain, std::move(name)});
  return id;
}

void PathTable::TakeNewDefinitions(std::vector<PathDefinition>* out) {
  MutexLock lock(&mutex_);
  for (auto& definition : unexported_) out->push_back(std::move(definition));
  unexported_.clear();
}

size_t PathTable::size() const {
  MutexLock lock(&mutex_);
  return ids_.size();
}

}  // namespace flopscope::injector
