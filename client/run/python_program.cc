#include "client/run/python_program.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

// python, python3, python3.11, pythonw, torchrun (a Python launcher of Python processes).
bool IsPythonName(const std::string& name) {
  if (name == "torchrun" || absl::EndsWith(name, ".py")) return true;
  if (!absl::StartsWith(name, "python")) return false;
  for (char c : name.substr(6)) {
    if (!(c >= '0' && c <= '9') && c != '.' && c != 'w' && c != 'm') return false;
  }
  return true;
}

// The file the command's program names: the path as given when it has a '/', else the first
// regular file of that name on `path` (as execvp finds it); "" when none.
std::string FindProgram(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return program;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : std::string(dir)) / program;
    std::error_code error;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
  }
  return "";
}

std::string FirstBytes(const std::string& file, size_t count) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(count, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(count));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace

bool ShebangNamesPython(const std::string& first_bytes) {
  if (!absl::StartsWith(first_bytes, "#!")) return false;
  const std::string line = first_bytes.substr(2, first_bytes.find('\n') - 2);
  // The interpreter, or the program `env` runs (its options skipped): `#!/usr/bin/env -S python3`.
  bool after_env = false;
  for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    if (after_env && absl::StartsWith(word, "-")) continue;
    const size_t slash = word.rfind('/');
    const std::string name(slash == absl::string_view::npos ? word : word.substr(slash + 1));
    if (!after_env && name == "env") {
      after_env = true;
      continue;
    }
    return IsPythonName(name) && !absl::EndsWith(name, ".py");
  }
  return false;
}

bool IsPythonProgram(const std::vector<std::string>& command, const Environment& env) {
  if (command.empty() || command.front().empty()) return false;
  const std::string name = fs::path(command.front()).filename().string();
  if (IsPythonName(name)) return true;
  const std::string file =
      FindProgram(command.front(), env.Get("PATH").value_or("/usr/local/bin:/usr/bin:/bin"));
  return !file.empty() && ShebangNamesPython(FirstBytes(file, 256));
}

}  // namespace flopscope::client
