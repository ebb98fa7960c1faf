#include "common/json/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>

#include "common/utf8.h"

namespace flopscope {
namespace {

constexpr std::string_view kReplacementCharacter = "\\ufffd";

// Appends the decimal text of an integer (std::to_chars: exact, locale-free).
template <typename Integer>
void AppendInteger(Integer value, std::string* out) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out->append(buffer, result.ptr);
}

void AppendEscapedAscii(char c, std::string* out) {
  switch (c) {
    case '"':
      *out += "\\\"";
      return;
    case '\\':
      *out += "\\\\";
      return;
    case '\b':
      *out += "\\b";
      return;
    case '\f':
      *out += "\\f";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
    default:
      break;
  }
  const auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20) {
    constexpr char kHex[] = "0123456789abcdef";
    *out += "\\u00";
    out->push_back(kHex[byte >> 4]);
    out->push_back(kHex[byte & 0xF]);
  } else {
    out->push_back(c);
  }
}

}  // namespace

std::string JsonWriter::Quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  while (!text.empty()) {
    if (static_cast<unsigned char>(text[0]) < 0x80) {
      AppendEscapedAscii(text[0], &out);
      text.remove_prefix(1);
      continue;
    }
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out += kReplacementCharacter;
      text.remove_prefix(1);
    } else {
      out.append(text.substr(0, length));
      text.remove_prefix(length);
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
  AppendInteger(value, &out_);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  AppendInteger(value, &out_);
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

}  // namespace flopscope
