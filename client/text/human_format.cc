#include "client/text/human_format.h"

#include <array>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flopscope::client {
namespace {

// `value` (>= 1, < 1000) with three significant digits: 1.23, 12.3, 123.
std::string ThreeDigits(double value) {
  if (value < 10) return absl::StrFormat("%.2f", value);
  if (value < 100) return absl::StrFormat("%.1f", value);
  return absl::StrFormat("%.0f", value);
}

// Picks the largest unit the magnitude reaches; rounding up into the next unit ("999.7 K" would
// print as "1000 K") moves on to that unit instead.
std::string Scaled(double magnitude, const char* const* units, size_t unit_count) {
  size_t unit = 0;
  while (unit + 1 < unit_count && magnitude >= 999.5) {
    magnitude /= 1000;
    ++unit;
  }
  return absl::StrCat(ThreeDigits(magnitude), units[unit][0] == '\0' ? "" : " ", units[unit]);
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double magnitude = static_cast<double>(bytes);
  size_t unit = 0;
  while (unit + 1 < kUnits.size() && magnitude >= 999.5) {
    magnitude /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  return absl::StrCat(ThreeDigits(magnitude), " ", kUnits[unit]);
}

std::string FormatDuration(int64_t nanoseconds) {
  static constexpr std::array<const char*, 4> kUnits = {"ns", "us", "ms", "s"};
  const double magnitude = std::fabs(static_cast<double>(nanoseconds));
  const char* sign = nanoseconds < 0 ? "-" : "";
  if (magnitude < 999.5) return absl::StrCat(sign, magnitude, " ns");
  return absl::StrCat(sign, Scaled(magnitude, kUnits.data(), kUnits.size()));
}

std::string FormatCount(double count) {
  static constexpr std::array<const char*, 6> kUnits = {"", "K", "M", "G", "T", "P"};
  if (!std::isfinite(count)) return "-";
  const double magnitude = std::fabs(count);
  const char* sign = count < 0 ? "-" : "";
  if (magnitude < 999.5) return absl::StrCat(sign, absl::StrFormat("%.0f", magnitude));
  return absl::StrCat(sign, Scaled(magnitude, kUnits.data(), kUnits.size()));
}

std::string FormatTimestamp(int64_t unix_nanoseconds, absl::TimeZone zone) {
  if (unix_nanoseconds == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(unix_nanoseconds), zone);
}

}  // namespace flopscope::client
