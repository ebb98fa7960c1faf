#include "importer/micros_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace flopscope::importer {
namespace {

constexpr uint64_t kMaxNanos = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t kMaxMicros = kMaxNanos / 1000;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Exponent notation is rare in traces (tiny or huge values only): a double is precise enough
// there, and the result is range-checked like everything else.
std::optional<int64_t> FromDouble(absl::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double micros = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(micros)) return std::nullopt;
  const double nanos = std::round(micros * 1000.0);
  if (std::fabs(nanos) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(nanos);
}

}  // namespace

std::optional<int64_t> MicrosTextToNanos(absl::string_view text) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  const size_t digits_start = i;
  uint64_t micros = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (micros > kMaxMicros) return std::nullopt;  // checked before it could overflow uint64
    micros = micros * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == digits_start || micros > kMaxMicros) return std::nullopt;
  uint64_t fraction_ns = 0;
  int fraction_digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t fraction_start = i;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      if (fraction_digits < 3) {
        fraction_ns = fraction_ns * 10 + static_cast<uint64_t>(text[i] - '0');
      } else if (fraction_digits == 3) {
        round_up = text[i] >= '5';
      }
      ++fraction_digits;
    }
    if (i == fraction_start) return std::nullopt;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) return FromDouble(text);
  if (i != text.size()) return std::nullopt;
  for (int k = fraction_digits; k < 3; ++k) fraction_ns *= 10;
  const uint64_t nanos = micros * 1000 + fraction_ns + (round_up ? 1 : 0);
  if (nanos > kMaxNanos) return std::nullopt;
  const int64_t value = static_cast<int64_t>(nanos);
  return negative ? -value : value;
}

}  // namespace flopscope::importer

namespace flopscope::importer {
namespace {

// Index just past the string that opens at text[i] (a quote).
size_t SkipString(absl::string_view text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return text.size();
}

// Index just past the value that starts at text[i].
size_t SkipValue(absl::string_view text, size_t i) {
  if (i >= text.size()) return i;
  if (text[i] == '"') return SkipString(text, i);
  if (text[i] != '{' && text[i] != '[') {
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' &&
           text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t') {
      ++i;
    }
    return i;
  }
  int depth = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      i = SkipString(text, i);
      continue;
    }
    ++i;
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) break;
  }
  return i;
}

size_t SkipSpaces(absl::string_view text, size_t i) {
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) {
    ++i;
  }
  return i;
}

}  // namespace

EventTimeText FindEventTimeText(absl::string_view text) {
  EventTimeText found;
  size_t i = SkipSpaces(text, 0);
  if (i >= text.size() || text[i] != '{') return found;
  ++i;
  while (true) {
    i = SkipSpaces(text, i);
    if (i >= text.size() || text[i] != '"') return found;
    const size_t key_end = SkipString(text, i);
    const absl::string_view key = text.substr(i + 1, key_end - i - 2);
    i = SkipSpaces(text, key_end);
    if (i >= text.size() || text[i] != ':') return found;
    i = SkipSpaces(text, i + 1);
    const size_t value_end = SkipValue(text, i);
    const bool scalar = i < text.size() && text[i] != '"' && text[i] != '{' && text[i] != '[';
    if (scalar && key == "ts") found.ts = text.substr(i, value_end - i);
    if (scalar && key == "dur") found.dur = text.substr(i, value_end - i);
    i = SkipSpaces(text, value_end);
    if (i >= text.size() || text[i] != ',') return found;
    ++i;
  }
}

}  // namespace flopscope::importer
