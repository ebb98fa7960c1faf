#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flopscope::client {

// A copy of a process environment that can be edited and then handed to exec. Working on a copy
// (instead of setenv on our own) keeps the `run` logic a pure function of its inputs, which is
// what the tests check.
class Environment {
 public:
  Environment() = default;
  // Entries "NAME=value"; an entry without '=' is kept as a name with an empty value.
  static Environment FromEntries(const std::vector<std::string>& entries);
  static Environment FromProcess();

  // The value, or nullopt when unset. An empty value counts as set.
  std::optional<std::string> Get(std::string_view name) const;
  // The value when set and non-empty (the usual reading of variables like SLURM_JOB_ID).
  std::optional<std::string> GetNonEmpty(std::string_view name) const;
  void Set(std::string_view name, std::string_view value);

  // "NAME=value" strings in a stable order, for execve.
  std::vector<std::string> ToEntries() const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace flopscope::client
