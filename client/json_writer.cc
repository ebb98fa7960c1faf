#include "client/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>

#include "absl/strings/str_format.h"

namespace flopscope::client {
namespace {

constexpr std::string_view kReplacementCharacter = "\\ufffd";

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF are rejected, as RFC 3629 requires).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < second_min || byte(i + 1) > second_max) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

void AppendEscapedAscii(char c, std::string& out) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (static_cast<unsigned char>(c) < 0x20) {
    absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
  } else {
    out.push_back(c);
  }
}

}  // namespace

std::string JsonWriter::Quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      AppendEscapedAscii(text[i], out);
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += kReplacementCharacter;
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  out.push_back('"');
  return out;
}

void JsonWriter::NewLine() {
  if (indent_width_ <= 0) return;
  out_.push_back('\n');
  out_.append(stack_.size() * static_cast<size_t>(indent_width_), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    assert(!root_written_ && "a JSON document holds one root value");
    root_written_ = true;
    return;
  }
  Level& level = stack_.back();
  if (level.scope == Scope::kObject) {
    assert(level.key_pending && "an object member needs a key before its value");
    level.key_pending = false;
    return;
  }
  if (level.items++ > 0) out_.push_back(',');
  NewLine();
}

void JsonWriter::Open(Scope scope, char bracket) {
  BeforeValue();
  out_.push_back(bracket);
  stack_.push_back(Level{scope});
}

void JsonWriter::Close(Scope scope, char bracket) {
  assert(!stack_.empty() && stack_.back().scope == scope && !stack_.back().key_pending);
  const bool had_items = stack_.back().items > 0;
  stack_.pop_back();
  if (had_items) NewLine();
  out_.push_back(bracket);
}

JsonWriter& JsonWriter::BeginObject() {
  Open(Scope::kObject, '{');
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Close(Scope::kObject, '}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Open(Scope::kArray, '[');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(Scope::kArray, ']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  assert(!stack_.empty() && stack_.back().scope == Scope::kObject && !stack_.back().key_pending);
  Level& level = stack_.back();
  if (level.items++ > 0) out_.push_back(',');
  NewLine();
  out_ += Quote(key);
  out_ += indent_width_ > 0 ? ": " : ":";
  level.key_pending = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += Quote(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppendFormat(&out_, "%d", value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppendFormat(&out_, "%d", value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  BeforeValue();
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out_.append(buffer, result.ptr);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

std::string JsonWriter::Finish() const {
  assert(stack_.empty() && "unclosed JSON object or array");
  return out_ + "\n";
}

}  // namespace flopscope::client
