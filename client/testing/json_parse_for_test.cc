#include "client/testing/json_parse_for_test.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace flopscope::client::testing {
namespace {

// Reads JSON from the file named in argv[1]; prints one "path<TAB>value" line per leaf (values as
// compact JSON with non-ASCII escaped, so a line never holds a raw tab or newline).
constexpr const char kFlattenScript[] = R"py(
import json, sys
def reject_constant(name):
    raise ValueError("not JSON: " + name)
def pairs_without_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in object")
    return dict(pairs)
with open(sys.argv[1], "rb") as f:
    data = json.loads(f.read().decode("utf-8", errors="strict"),
                      parse_constant=reject_constant,
                      object_pairs_hook=pairs_without_duplicates)
def walk(path, value):
    if isinstance(value, dict):
        print(path + "#\t" + str(len(value)))
        for key, child in value.items():
            walk(path + "." + key if path else key, child)
    elif isinstance(value, list):
        print(path + "#\t" + str(len(value)))
        for index, child in enumerate(value):
            walk(path + "[" + str(index) + "]", child)
    else:
        print(path + "\t" + json.dumps(value, ensure_ascii=True))
walk("", data)
)py";

// The configured interpreter (CMake's Python3_EXECUTABLE), else python3 from PATH; empty when
// neither can import json (the tests then skip rather than fail on a broken interpreter).
std::string PythonExecutable() {
  static const std::string chosen = [] {
    std::vector<std::string> candidates;
#ifdef FLOPSCOPE_TEST_PYTHON
    if (std::string configured = FLOPSCOPE_TEST_PYTHON; !configured.empty()) {
      candidates.push_back(configured);
    }
#endif
    candidates.push_back("python3");
    for (const std::string& candidate : candidates) {
      const std::string probe = absl::StrCat("'", candidate, "' -c 'import json' >/dev/null 2>&1");
      if (std::system(probe.c_str()) == 0) return candidate;
    }
    return std::string();
  }();
  return chosen;
}

std::string WriteTemporary(const std::string& stem, const std::string& content) {
  std::string path = absl::StrCat(::testing::TempDir(), "/", stem, "-XXXXXX");
  const int fd = mkstemp(path.data());
  if (fd < 0) return "";
  FILE* file = fdopen(fd, "w");
  std::fwrite(content.data(), 1, content.size(), file);
  std::fclose(file);
  return path;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> FlattenJson(const std::string& json) {
  const std::string python = PythonExecutable();
  if (python.empty()) return absl::UnavailableError("no python3 that can import json");
  const std::string script = WriteTemporary("flatten_json_py", kFlattenScript);
  const std::string input = WriteTemporary("flatten_json_input", json);
  if (script.empty() || input.empty()) return absl::InternalError("cannot create temporary files");
  const std::string command = absl::StrCat("'", python, "' '", script, "' '", input, "' 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::UnavailableError("cannot start python3");
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  unlink(script.c_str());
  unlink(input.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return absl::InvalidArgumentError("invalid JSON: " + output);
  std::map<std::string, std::string> flat;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    if (!absl::StrContains(line, '\t')) continue;  // not ours (an interpreter warning)
    std::pair<std::string, std::string> entry = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    flat[entry.first] = entry.second;
  }
  return flat;
}

}  // namespace flopscope::client::testing
