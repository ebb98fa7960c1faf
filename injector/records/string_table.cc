#include "injector/records/string_table.h"

#include "common/utf8.h"

namespace flopscope::injector {

uint32_t StringTable::Intern(std::string_view raw_value) {
  std::string value;
  AppendSanitizedUtf8(raw_value.substr(0, kMaxStringBytes + 4), &value);
  TruncateUtf8(kMaxStringBytes, &value);
  MutexLock lock(&mutex_);
  if (auto it = ids_.find(value); it != ids_.end()) return it->second;
  if (ids_.size() >= max_strings_) return 0;
  const auto id = static_cast<uint32_t>(ids_.size() + 1);
  ids_.emplace(value, id);
  unexported_.push_back(StringDefinition{id, std::move(value)});
  return id;
}

void StringTable::TakeNewDefinitions(std::vector<StringDefinition>* out) {
  MutexLock lock(&mutex_);
  for (auto& definition : unexported_) out->push_back(std::move(definition));
  unexported_.clear();
}

}  // namespace flopscope::injector
