#include "client/connect/environment.h"

extern char** environ;  // POSIX: the calling process's environment

namespace flopscope::client {

Environment Environment::FromEntries(const std::vector<std::string>& entries) {
  Environment env;
  for (const std::string& entry : entries) {
    const size_t equals = entry.find('=');
    if (equals == std::string::npos) {
      env.values_.emplace(entry, "");
    } else {
      env.values_.emplace(entry.substr(0, equals), entry.substr(equals + 1));
    }
  }
  return env;
}

Environment Environment::FromProcess() {
  std::vector<std::string> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    entries.emplace_back(*entry);
  }
  return FromEntries(entries);
}

std::optional<std::string> Environment::Get(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Environment::GetNonEmpty(std::string_view name) const {
  std::optional<std::string> value = Get(name);
  if (value.has_value() && value->empty()) return std::nullopt;
  return value;
}

void Environment::Set(std::string_view name, std::string_view value) {
  values_.insert_or_assign(std::string(name), std::string(value));
}

std::vector<std::string> Environment::ToEntries() const {
  std::vector<std::string> entries;
  entries.reserve(values_.size());
  for (const auto& [name, value] : values_) entries.push_back(name + "=" + value);
  return entries;
}

}  // namespace flopscope::client
