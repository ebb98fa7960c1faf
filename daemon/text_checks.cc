#include "daemon/text_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the sequence starting at `lead`, and the smallest code point it may encode (to
// reject overlong forms); 0 for a byte that cannot start a sequence.
int SequenceLength(unsigned char lead, uint32_t* min_code_point) {
  if (lead < 0x80) {
    *min_code_point = 0;
    return 1;
  }
  if ((lead & 0xE0) == 0xC0) {
    *min_code_point = 0x80;
    return 2;
  }
  if ((lead & 0xF0) == 0xE0) {
    *min_code_point = 0x800;
    return 3;
  }
  if ((lead & 0xF8) == 0xF0) {
    *min_code_point = 0x10000;
    return 4;
  }
  return 0;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    if (bytes[i] < 0x80) {  // ASCII fast path: most names are plain identifiers.
      ++i;
      continue;
    }
    uint32_t min_code_point = 0;
    const int length = SequenceLength(bytes[i], &min_code_point);
    if (length == 0 || size - i < static_cast<size_t>(length)) return false;
    uint32_t code_point = bytes[i] & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      if (!IsContinuation(bytes[i + k])) return false;
      code_point = (code_point << 6) | (bytes[i + k] & 0x3F);
    }
    if (code_point < min_code_point || code_point > 0x10FFFF) return false;
    if (code_point >= 0xD800 && code_point <= 0xDFFF) return false;
    i += static_cast<size_t>(length);
  }
  return true;
}

std::string TextProblem(absl::string_view text, size_t max_bytes, EmptyText empty) {
  if (text.empty()) return empty == EmptyText::kRejected ? "is empty" : "";
  if (text.size() > max_bytes) {
    return absl::StrCat("is ", text.size(), " bytes long (at most ", max_bytes, ")");
  }
  if (text.find('\0') != absl::string_view::npos) return "holds a NUL byte";
  if (!IsValidUtf8(text)) return "is not valid UTF-8";
  return "";
}

}  // namespace flopscope::daemon
