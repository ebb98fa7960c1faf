#include "client/text/deepspeed_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <utility>

namespace flopscope::client {
namespace {

// Python's round(value, precision): glibc's "%.*f" rounds the exact binary value correctly (ties,
// which only exactly representable halves can be, go to even), as CPython's dtoa-based round does.
double PythonRound(double value, int precision) {
  if (!std::isfinite(value)) return value;
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), "%.*f", precision, value);
  return std::strtod(buffer, nullptr);
}

// Python's "{:g}": C's "%g" for finite values (six significant digits, trailing zeros dropped,
// exponent form from 1e+06 and below 1e-04).
std::string FormatG(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::pair<double, std::string> AutomaticUnit(double value) {
  if (value >= 1e12) return {1e12, "T"};
  if (value >= 1e9) return {1e9, "G"};
  if (value >= 1e6) return {1e6, "M"};
  if (value >= 1e3) return {1e3, "K"};
  if (value >= 1 || value == 0) return {1, ""};
  if (value >= 1e-3) return {1e-3, "m"};
  return {1e-6, "u"};
}

double MagnitudeOf(const std::string& units) {
  if (units == "T") return 1e12;
  if (units == "G") return 1e9;
  if (units == "M") return 1e6;
  if (units == "K") return 1e3;
  if (units == "m") return 1e-3;
  if (units == "u") return 1e-6;
  return 1;
}

}  // namespace

std::string RoundedG(double value, int precision) { return FormatG(PythonRound(value, precision)); }

std::string NumberToString(double value, const std::string& units, int precision) {
  double magnitude = 1;
  std::string unit = units;
  if (units.empty()) {
    std::tie(magnitude, unit) = AutomaticUnit(value);
  } else {
    magnitude = MagnitudeOf(units);
  }
  return RoundedG(value / magnitude, precision) + " " + unit;
}

std::string MacsToString(double macs, const std::string& units, int precision) {
  return NumberToString(macs, units, precision) + "MACs";
}

std::string FlopsToString(double flops_per_second, const std::string& units, int precision) {
  return NumberToString(flops_per_second, units, precision) + "FLOPS";
}

std::string ParamsToString(double params, const std::string& units, int precision) {
  std::string text = NumberToString(params, units == "B" ? "G" : units, precision);
  for (char& c : text) {
    if (c == 'G') c = 'B';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string DurationToString(double seconds, const std::string& units, int precision) {
  return NumberToString(seconds, units, precision) + "s";
}

}  // namespace flopscope::client
