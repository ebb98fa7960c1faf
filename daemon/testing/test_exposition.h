#pragma once

// Prometheus exposition text read back for /metrics tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace flopscope::daemon::fixtures {

inline constexpr int64_t kSecondNs = 1'000'000'000;

// "name{labels}" -> value for every sample line of `text` (label values may hold spaces: the
// value is after the last one); a test failure on a sample line whose value does not parse.
inline std::map<std::string, double> ExpositionSamples(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    EXPECT_TRUE(space != absl::string_view::npos &&
                absl::SimpleAtod(line.substr(space + 1), &value))
        << line;
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

}  // namespace flopscope::daemon::fixtures
