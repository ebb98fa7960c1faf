#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace flopscope::injector {

struct MetadataEntry {
  std::string key;
  std::string value;
};

// Values longer than this are cut (at a UTF-8 boundary).
inline constexpr size_t kMaxMetadataBytes = 4096;
// Keys longer than this are cut: the daemon refuses a longer key, and with it the whole batch
// (kMaxMetadataKeyBytes in daemon/validate/batch_validator.h; metadata_mark_fuzzer checks the two
// agree).
inline constexpr size_t kMaxMetadataKeyBytes = 1024;

// Parses the text of a mark in the `flopscope` NVTX domain (DESIGN: metadata channel):
//   "parallel tp=2 pp=1 dp=4"      -> key "parallel", value "tp=2 pp=1 dp=4"
//   "params Model/layer.0=1234"    -> key "params Model/layer.0", value "1234" (split at the LAST
//                                     '=', because range paths may themselves hold '=')
// Returns nothing for text that carries no key (no '=', or nothing before it). Key and value
// come back as valid UTF-8 (each ill-formed byte becomes 3 bytes of U+FFFD), then cut.
std::optional<MetadataEntry> ParseMetadataMark(std::string_view text);

}  // namespace flopscope::injector
