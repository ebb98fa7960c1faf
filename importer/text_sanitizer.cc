#include "importer/text_sanitizer.h"

#include <algorithm>
#include <string_view>

#include "common/utf8.h"

namespace flopscope::importer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string CleanText(absl::string_view text, size_t max_bytes) {
  // The common rule keeps NUL (it is well-formed UTF-8); this policy replaces it too.
  // Bound the work first: a character starting before max_bytes ends within 3 bytes after it,
  // and every replacement is at least as long as what it replaces, so nothing past this prefix
  // can survive the cut.
  const std::string_view bounded(text.data(), std::min(text.size(), max_bytes + 3));
  std::string sanitized;
  AppendSanitizedUtf8(bounded, &sanitized);
  std::string out;
  out.reserve(sanitized.size() < max_bytes ? sanitized.size() : max_bytes);
  for (char c : sanitized) {
    if (c == '\0') {
      out.append(kReplacement);
    } else {
      out.push_back(c);
    }
  }
  TruncateUtf8(max_bytes, &out);
  return out;
}

}  // namespace flopscope::importer
