#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace flopscope::client::testing {

// Parses `json` with an independent parser (python3's json module, strict mode) and flattens it
// into "path -> value" where a path looks like `modules[2].gpu_time_ns` and a value is the leaf
// re-encoded as compact JSON (`"text"`, `12`, `null`, `true`). Arrays and objects also get an
// entry `<path>#` holding their size, so tests can check counts and that nothing extra is there.
// UNAVAILABLE when no python3 that can import json is found (tests skip then); INVALID_ARGUMENT
// when the text is not valid JSON (the parser's message included).
absl::StatusOr<std::map<std::string, std::string>> FlattenJson(const std::string& json);

}  // namespace flopscope::client::testing
