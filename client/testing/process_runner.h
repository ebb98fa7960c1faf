#pragma once

#include <map>
#include <string>
#include <vector>

namespace flopscope::client::testing {

// How a child process ended and what it wrote.
struct ProcessResult {
  bool exited = false;  // exited normally (exit_code valid)
  int exit_code = -1;
  bool signaled = false;  // killed by a signal (signal valid)
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] a path) with this process's environment changed by `set_env` (a value
// "<unset>" removes the variable) and waits for it. stdout/stderr are captured through files.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& set_env = {});

inline constexpr const char kUnset[] = "<unset>";

}  // namespace flopscope::client::testing
