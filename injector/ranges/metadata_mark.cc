#include "injector/ranges/metadata_mark.h"

#include "common/utf8.h"

namespace flopscope::injector {
namespace {

constexpr std::string_view kParallelPrefix = "parallel ";

std::string_view TrimSpaces(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

MetadataEntry MakeEntry(std::string_view key, std::string_view value) {
  MetadataEntry entry;
  AppendSanitizedUtf8(key, &entry.key);
  AppendSanitizedUtf8(value, &entry.value);
  TruncateUtf8(kMaxMetadataKeyBytes, &entry.key);
  TruncateUtf8(kMaxMetadataBytes, &entry.value);
  return entry;
}

}  // namespace

std::optional<MetadataEntry> ParseMetadataMark(std::string_view text) {
  text = TrimSpaces(text);
  if (text.substr(0, kParallelPrefix.size()) == kParallelPrefix) {
    return MakeEntry("parallel", TrimSpaces(text.substr(kParallelPrefix.size())));
  }
  const size_t equals = text.rfind('=');
  if (equals == std::string_view::npos) return std::nullopt;
  const std::string_view key = TrimSpaces(text.substr(0, equals));
  if (key.empty()) return std::nullopt;
  return MakeEntry(key, TrimSpaces(text.substr(equals + 1)));
}

}  // namespace flopscope::injector
