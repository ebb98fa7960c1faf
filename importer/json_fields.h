#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/strings/string_view.h"

namespace flopscope::importer {

// simdjson speaks std::string_view; Debian's Abseil has its own absl::string_view.
inline std::string_view StdView(absl::string_view s) { return {s.data(), s.size()}; }
inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// Lenient field access on simdjson DOM values: Kineto writes the same field as an integer, a
// double or a numeric string depending on its version, so each getter accepts every spelling
// that means a number and returns nullopt for anything else (or a missing key).

std::optional<double> NumberValue(simdjson::dom::element value);
std::optional<int64_t> IntValue(simdjson::dom::element value);
std::optional<double> NumberField(simdjson::dom::element object, absl::string_view key);
std::optional<int64_t> IntField(simdjson::dom::element object, absl::string_view key);
// Non-negative integers only (ids, sizes); nullopt for negative values.
std::optional<uint64_t> UintField(simdjson::dom::element object, absl::string_view key);
// "" when absent or not a string.
absl::string_view StringField(simdjson::dom::element object, absl::string_view key);

// A thread or process id as Kineto writes it: an integer, a numeric string ("25738") or a label
// ("stream 7"). Labels get a stable hash with bit 62 set, apart from any real OS thread id; the
// top two bits of numeric ids are cleared (a negative id must not look like a stream key).
uint64_t IdKey(simdjson::dom::element value);

}  // namespace flopscope::importer
