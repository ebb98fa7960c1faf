#include "importer/python_repr.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flopscope::importer {
namespace {

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `count` hex digits at text[i]; -1 when they are not all there.
int64_t ReadHex(absl::string_view text, size_t i, size_t count) {
  if (i + count > text.size()) return -1;
  int64_t value = 0;
  for (size_t k = 0; k < count; ++k) {
    const int digit = HexValue(text[i + k]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

void AppendCodePoint(int64_t code_point, std::string* out) {
  if (code_point >= 0x10000) {
    const int64_t v = code_point - 0x10000;
    absl::StrAppendFormat(out, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
  } else {
    absl::StrAppendFormat(out, "\\u%04x", code_point);
  }
}

class Converter {
 public:
  explicit Converter(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::string> Run() {
    out_.reserve(text_.size() + 16);
    while (i_ < text_.size()) {
      const char c = text_[i_];
      absl::Status status = absl::OkStatus();
      if (c == '\'' || c == '"') {
        status = String(c);
      } else if (IsIdentifierChar(c) && !(c >= '0' && c <= '9')) {
        status = Identifier();
      } else if (c == '(') {
        out_.push_back('[');
        ++i_;
      } else if (c == ')' || c == ']' || c == '}') {
        DropTrailingComma();
        out_.push_back(c == ')' ? ']' : c);
        ++i_;
      } else if (IsNumberStart()) {
        Number();
      } else {
        out_.push_back(c);
        ++i_;
      }
      if (!status.ok()) return status;
    }
    return std::move(out_);
  }

 private:
  bool IsNumberStart() const {
    const char c = text_[i_];
    if (c == '+') {
      // Only a sign: Number() drops it and takes the next character as part of the number.
      return i_ + 1 < text_.size() && text_[i_ + 1] >= '0' && text_[i_ + 1] <= '9';
    }
    return (c >= '0' && c <= '9') || c == '-';
  }

  // A whole numeric token ("-1.5e-05"); "-inf" and "-nan" are Python's reprs of non-finite
  // floats, which JSON cannot hold.
  void Number() {
    if (text_.substr(i_, 4) == "-inf" || text_.substr(i_, 4) == "-nan") {
      out_.append("null");
      i_ += 4;
      return;
    }
    if (text_[i_] == '+') ++i_;  // JSON has no unary plus
    const size_t start = i_++;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      const bool exponent_sign =
          (c == '+' || c == '-') && (text_[i_ - 1] == 'e' || text_[i_ - 1] == 'E');
      if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || exponent_sign)) break;
      ++i_;
    }
    absl::StrAppend(&out_, text_.substr(start, i_ - start));
  }

  void DropTrailingComma() {
    size_t end = out_.size();
    while (end > 0 && (out_[end - 1] == ' ' || out_[end - 1] == '\n' || out_[end - 1] == '\t')) {
      --end;
    }
    if (end > 0 && out_[end - 1] == ',') out_.erase(end - 1, 1);
  }

  absl::Status Identifier() {
    const size_t start = i_;
    while (i_ < text_.size() && IsIdentifierChar(text_[i_])) ++i_;
    const absl::string_view word = text_.substr(start, i_ - start);
    if (word == "True" || word == "true") {
      out_.append("true");
    } else if (word == "False" || word == "false") {
      out_.append("false");
    } else if (word == "None" || word == "null" || word == "inf" || word == "nan") {
      out_.append("null");
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected '", word, "' at offset ", start, " of a Python repr"));
    }
    return absl::OkStatus();
  }

  absl::Status String(char quote) {
    const size_t start = i_++;
    out_.push_back('"');
    while (i_ < text_.size() && text_[i_] != quote) {
      const char c = text_[i_];
      if (c == '\\') {
        if (absl::Status s = Escape(); !s.ok()) return s;
        continue;
      }
      if (c == '"') {
        out_.append("\\\"");
      } else if (static_cast<unsigned char>(c) < 0x20) {
        absl::StrAppendFormat(&out_, "\\u%04x", static_cast<int>(c));
      } else {
        out_.push_back(c);
      }
      ++i_;
    }
    if (i_ >= text_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unterminated string starting at offset ", start, " of a Python repr"));
    }
    ++i_;  // the closing quote
    out_.push_back('"');
    return absl::OkStatus();
  }

  absl::Status Escape() {
    if (i_ + 1 >= text_.size()) {
      return absl::InvalidArgumentError("a Python repr ends inside an escape sequence");
    }
    const char kind = text_[i_ + 1];
    int64_t code_point = -1;
    size_t length = 2;
    switch (kind) {
      case '\'':
        out_.push_back('\'');
        break;
      case '"':
      case '\\':
      case '/':
      case 'n':
      case 'r':
      case 't':
      case 'b':
      case 'f':
        out_.push_back('\\');
        out_.push_back(kind);
        break;
      case 'x':
        code_point = ReadHex(text_, i_ + 2, 2);
        length = 4;
        break;
      case 'u':
        code_point = ReadHex(text_, i_ + 2, 4);
        length = 6;
        break;
      case 'U':
        code_point = ReadHex(text_, i_ + 2, 8);
        length = 10;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("unknown escape '\\", std::string(1, kind),
                                                       "' at offset ", i_, " of a Python repr"));
    }
    if ((kind == 'x' || kind == 'u' || kind == 'U') && (code_point < 0 || code_point > 0x10FFFF)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad escape at offset ", i_, " of a Python repr"));
    }
    if (code_point >= 0) AppendCodePoint(code_point, &out_);
    i_ += length;
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t i_ = 0;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> PythonReprToJson(absl::string_view repr) {
  return Converter(repr).Run();
}

}  // namespace flopscope::importer
