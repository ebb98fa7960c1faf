#include "common/utf8.h"

#include <cstdint>

namespace flopscope {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";  // U+FFFD

uint8_t ByteAt(std::string_view text, size_t i) { return static_cast<uint8_t>(text[i]); }

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

bool IsScalarValue(char32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

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

// True for a character a terminal would act on rather than show: C0, DEL, and C1 (whose UTF-8
// form is C2 80..C2 9F; some terminals read U+009B as CSI).
bool IsControl(std::string_view sequence) {
  const uint8_t lead = ByteAt(sequence, 0);
  if (sequence.size() == 1) return lead < 0x20 || lead == 0x7F;
  return sequence.size() == 2 && lead == 0xC2 && ByteAt(sequence, 1) < 0xA0;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text) {
  if (text.empty()) return 0;
  const uint8_t lead = ByteAt(text, 0);
  if (lead < 0x80) return 1;
  // Table 3-7 of the Unicode standard: the lead fixes the length and the range of the second
  // byte, which is what excludes overlong forms (E0, F0), surrogates (ED) and > U+10FFFF (F4).
  size_t length = 0;
  uint8_t second_low = 0x80;
  uint8_t second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (ByteAt(text, 1) < second_low || ByteAt(text, 1) > second_high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (!IsContinuation(ByteAt(text, k))) return 0;
  }
  return length;
}

bool IsValidUtf8(std::string_view text) {
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

void AppendSanitizedUtf8(std::string_view text, std::string* out) {
  out->reserve(out->size() + text.size());
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out->append(kReplacementUtf8);
      text.remove_prefix(1);
    } else {
      out->append(text.substr(0, length));
      text.remove_prefix(length);
    }
  }
}

void AppendWideAsUtf8(const wchar_t* text, std::string* out) {
  if (text == nullptr) return;
  for (; *text != L'\0'; ++text) {
    const auto cp = static_cast<char32_t>(static_cast<uint32_t>(*text));
    AppendCodePoint(IsScalarValue(cp) ? cp : 0xFFFD, out);
  }
}

void TruncateUtf8(size_t max_bytes, std::string* text) {
  if (text->size() <= max_bytes) return;
  size_t cut = max_bytes;
  while (cut > 0 && IsContinuation(ByteAt(*text, cut))) --cut;
  text->resize(cut);
}

std::string PrintableForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    const std::string_view sequence = text.substr(0, length == 0 ? 1 : length);
    if (sequence == "\t") {
      out.push_back(' ');
    } else if (length == 0 || IsControl(sequence)) {
      out.append(kReplacementUtf8);
    } else {
      out.append(sequence);
    }
    text.remove_prefix(sequence.size());
  }
  return out;
}

}  // namespace flopscope
