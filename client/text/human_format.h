#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace flopscope::client {

// Figures as a person reads them in text reports: three significant digits and a unit.

// 950 -> "950 ns", 1'234'000 -> "1.23 ms", 12'345'000'000 -> "12.3 s". Negative -> "-1.23 ms".
std::string FormatDuration(int64_t nanoseconds);

// 999 -> "999", 1'234 -> "1.23 K", 125'000'000 -> "125 M" (K, M, G, T, P: powers of 1000).
std::string FormatCount(double count);

// 999 -> "999 B", 1'234'567 -> "1.18 MiB" (KiB, MiB, GiB, TiB, PiB: powers of 1024, as du).
std::string FormatBytes(uint64_t bytes);

// Unix-epoch nanoseconds as "2024-05-01 12:00:03" in `zone`; 0 (unknown) as "-".
std::string FormatTimestamp(int64_t unix_nanoseconds, absl::TimeZone zone);

}  // namespace flopscope::client
