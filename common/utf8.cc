#include "common/utf8.h"

#include <cstdint>

namespace flopscope::injector {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

void AppendCodePoint(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsScalarValue(char32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the well-formed sequence starting at text[0], or 0 when it is malformed (overlong
// forms, surrogates and values above U+10FFFF included).
size_t ValidSequenceLength(std::string_view text) {
  const auto lead = static_cast<unsigned char>(text[0]);
  size_t length;
  char32_t cp;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    cp = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (!IsContinuation(byte)) return 0;
    cp = (cp << 6) | (byte & 0x3F);
  }
  const char32_t min_for_length = length == 2 ? 0x80 : (length == 3 ? 0x800 : 0x10000);
  if (cp < min_for_length || !IsScalarValue(cp)) return 0;
  return length;
}

}  // namespace

void AppendSanitizedUtf8(std::string_view text, std::string* out) {
  out->reserve(out->size() + text.size());
  while (!text.empty()) {
    const size_t length = ValidSequenceLength(text);
    if (length == 0) {
      AppendCodePoint(kReplacement, out);
      text.remove_prefix(1);
    } else {
      out->append(text.data(), length);
      text.remove_prefix(length);
    }
  }
}

void AppendWideAsUtf8(const wchar_t* text, std::string* out) {
  if (text == nullptr) return;
  for (; *text != L'\0'; ++text) {
    const auto cp = static_cast<char32_t>(static_cast<uint32_t>(*text));
    AppendCodePoint(IsScalarValue(cp) ? cp : kReplacement, out);
  }
}

void TruncateUtf8(size_t max_bytes, std::string* text) {
  if (text->size() <= max_bytes) return;
  size_t cut = max_bytes;
  while (cut > 0 && IsContinuation(static_cast<unsigned char>((*text)[cut]))) --cut;
  text->resize(cut);
}

}  // namespace flopscope::injector
