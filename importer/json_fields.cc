#include "importer/json_fields.h"

#include <charconv>
#include <cmath>

namespace flopscope::importer {
namespace {

std::optional<int64_t> ParseInt(absl::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// FNV-1a: stable across runs and builds (absl::Hash is seeded per process).
uint64_t StableHash(absl::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

std::optional<double> NumberValue(simdjson::dom::element value) {
  double d = 0;
  if (value.is_number() && value.get_double().get(d) == simdjson::SUCCESS) return d;
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) {
    if (std::optional<int64_t> i = ParseInt(AbslView(text))) return static_cast<double>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> IntValue(simdjson::dom::element value) {
  int64_t i = 0;
  if (value.get_int64().get(i) == simdjson::SUCCESS) return i;
  uint64_t u = 0;
  if (value.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<int64_t>(u);
  double d = 0;
  if (value.get_double().get(d) == simdjson::SUCCESS && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    return static_cast<int64_t>(std::llround(d));
  }
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) return ParseInt(AbslView(text));
  return std::nullopt;
}

std::optional<double> NumberField(simdjson::dom::element object, absl::string_view key) {
  simdjson::dom::element value;
  if (object[StdView(key)].get(value) != simdjson::SUCCESS) return std::nullopt;
  return NumberValue(value);
}

std::optional<int64_t> IntField(simdjson::dom::element object, absl::string_view key) {
  simdjson::dom::element value;
  if (object[StdView(key)].get(value) != simdjson::SUCCESS) return std::nullopt;
  return IntValue(value);
}

std::optional<uint64_t> UintField(simdjson::dom::element object, absl::string_view key) {
  simdjson::dom::element value;
  if (object[StdView(key)].get(value) != simdjson::SUCCESS) return std::nullopt;
  uint64_t u = 0;
  if (value.get_uint64().get(u) == simdjson::SUCCESS) return u;
  const std::optional<int64_t> i = IntValue(value);
  if (!i.has_value() || *i < 0) return std::nullopt;
  return static_cast<uint64_t>(*i);
}

absl::string_view StringField(simdjson::dom::element object, absl::string_view key) {
  std::string_view text;
  if (object[StdView(key)].get_string().get(text) != simdjson::SUCCESS) return {};
  return AbslView(text);
}

uint64_t IdKey(simdjson::dom::element value) {
  // The top two bits are reserved: bit 63 marks GPU streams (trace_recording.h), bit 62 labels.
  if (std::optional<int64_t> id = IntValue(value)) {
    return static_cast<uint64_t>(*id) & ~(uint64_t{3} << 62);
  }
  std::string_view label;
  if (value.get_string().get(label) != simdjson::SUCCESS) return 0;
  return (StableHash(AbslView(label)) & ~(uint64_t{3} << 62)) | (uint64_t{1} << 62);
}

}  // namespace flopscope::importer
