#pragma once

#include <string>

namespace flopscope::client {

// Figures formatted exactly as the DeepSpeed Flops Profiler's helpers format them
// (profiling/flops_profiler/profiler.py: number_to_string and friends), so a flopscope report
// reads like the DeepSpeed output users know. The vectors in
// shared/data/DeepSpeed/REFERENCE_VALUES.md are the specification.
//
// The value is divided by the unit's magnitude, rounded to `precision` decimals the way Python's
// round() does (correctly rounded from the binary value) and printed as Python's "{:g}" does (six
// significant digits, no trailing zeros). `units` "" picks the unit from the magnitude: T, G, M,
// K, "" (for 1 <= x < 1000 and for 0), m, u (everything smaller, negatives included — a quirk kept
// for parity). An unknown unit letter means magnitude 1.
std::string NumberToString(double value, const std::string& units = "", int precision = 2);

// "426.52 MMACs", "0 MACs".
std::string MacsToString(double macs, const std::string& units = "", int precision = 2);
// "81.9 TFLOPS", "0 FLOPS".
std::string FlopsToString(double flops_per_second, const std::string& units = "",
                          int precision = 2);
// "61.71 K", "1.5 B" (G is written B, for billions), "110" (no trailing blank). Units "B" is
// accepted for billions.
std::string ParamsToString(double params, const std::string& units = "", int precision = 2);
// Seconds in: "76.67 ms", "34.09 us", "1.89 s", "0 s".
std::string DurationToString(double seconds, const std::string& units = "", int precision = 2);
// Python's "{:g}".format(round(value, precision)): the percentages of the detailed profile.
std::string RoundedG(double value, int precision = 2);

}  // namespace flopscope::client
