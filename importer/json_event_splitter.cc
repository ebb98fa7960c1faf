#include "importer/json_event_splitter.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace flopscope::importer {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

bool IsJsonWhitespace(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool EndsScalar(char c) {
  return c == ',' || c == '}' || c == ']' || IsJsonWhitespace(static_cast<unsigned char>(c));
}

}  // namespace

absl::Status JsonEventSplitter::Run() {
  buf_.resize(kChunkBytes);
  if (Peek() == 0xEF && end_ - pos_ >= 3 &&
      std::memcmp(buf_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) {
    pos_ += 3;  // a UTF-8 byte order mark, which some editors add
  }
  const int first = SkipWhitespaceAndPeek();
  if (first == '{') {
    ++pos_;
    if (absl::Status s = ParseObjectMembers(); !s.ok()) return s;
  } else if (first == '[') {
    ++pos_;
    if (absl::Status s = ParseEventArray(); !s.ok()) return s;
  } else if (first < 0) {
    return io_error_.ok() ? Error(pos_, "the file is empty") : io_error_;
  } else {
    return Error(pos_, "not a JSON trace (expected '{' or '[' first)");
  }
  if (SkipWhitespaceAndPeek() >= 0) return Error(pos_, "unexpected data after the end of the JSON");
  return io_error_;
}

absl::Status JsonEventSplitter::ParseObjectMembers() {
  const uint64_t start = OffsetOf(pos_ - 1);
  int c = SkipWhitespaceAndPeek();
  if (c == '}') {
    ++pos_;
    return absl::OkStatus();
  }
  std::string key;
  while (true) {
    if (c != '"') {
      return c < 0 ? EndOfInput("the top-level object", start) : Error(pos_, "expected a key");
    }
    if (absl::Status s = ReadKey(&key); !s.ok()) return s;
    if (SkipWhitespaceAndPeek() != ':') return Error(pos_, "expected ':' after a key");
    ++pos_;
    c = SkipWhitespaceAndPeek();
    if (key == "traceEvents" && c == '[') {
      ++pos_;
      if (absl::Status s = ParseEventArray(); !s.ok()) return s;
    } else {
      absl::string_view value;
      uint64_t offset = 0;
      if (absl::Status s = ScanValue(&value, &offset); !s.ok()) return s;
      if (absl::Status s = visitor_->OnMember(key, value, offset); !s.ok()) return s;
    }
    c = SkipWhitespaceAndPeek();
    if (c == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    if (c != ',') {
      return c < 0 ? EndOfInput("the top-level object", start) : Error(pos_, "expected ',' or '}'");
    }
    ++pos_;
    c = SkipWhitespaceAndPeek();
  }
}

absl::Status JsonEventSplitter::ParseEventArray() {
  saw_event_array_ = true;
  const uint64_t start = OffsetOf(pos_ - 1);
  int c = SkipWhitespaceAndPeek();
  if (c == ']') {
    ++pos_;
    return absl::OkStatus();
  }
  while (true) {
    if (c != '{') {
      return c < 0 ? EndOfInput("the event array", start)
                   : Error(pos_, "an element of the event array is not an object");
    }
    absl::string_view value;
    uint64_t offset = 0;
    if (absl::Status s = ScanValue(&value, &offset); !s.ok()) return s;
    if (absl::Status s = visitor_->OnEvent(value, offset); !s.ok()) return s;
    c = SkipWhitespaceAndPeek();
    if (c == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    if (c != ',') {
      return c < 0 ? EndOfInput("the event array", start)
                   : Error(pos_, "expected ',' or ']' after an event");
    }
    ++pos_;
    c = SkipWhitespaceAndPeek();
  }
}

absl::Status JsonEventSplitter::ReadKey(std::string* key) {
  mark_ = pos_;
  if (absl::Status s = ScanString(); !s.ok()) return s;
  key->assign(buf_.data() + mark_ + 1, pos_ - mark_ - 2);
  return absl::OkStatus();
}

absl::Status JsonEventSplitter::ScanValue(absl::string_view* value, uint64_t* offset) {
  mark_ = pos_;
  const int first = Peek();
  absl::Status status = absl::OkStatus();
  if (first == '{' || first == '[') {
    status = ScanNested();
  } else if (first == '"') {
    status = ScanString();
  } else if (first < 0) {
    return EndOfInput("a value", OffsetOf(mark_));
  } else if (EndsScalar(static_cast<char>(first))) {
    return Error(pos_, "expected a value");  // `"key": ,` would hand the visitor nothing
  } else {
    // A number or a literal: the visitor's parser checks its spelling.
    while (true) {
      if (pos_ == end_ && !Fill()) break;
      if (EndsScalar(buf_[pos_])) break;
      ++pos_;
    }
    if (!io_error_.ok()) return io_error_;
  }
  if (!status.ok()) return status;
  *value = absl::string_view(buf_.data() + mark_, pos_ - mark_);
  *offset = OffsetOf(mark_);
  return absl::OkStatus();
}

// pos_ is at an opening quote; leaves pos_ after the closing one.
absl::Status JsonEventSplitter::ScanString() {
  const size_t open = pos_ - mark_;  // relative to mark_, which Fill may move
  ++pos_;
  while (true) {
    const char* quote =
        pos_ < end_ ? static_cast<const char*>(std::memchr(buf_.data() + pos_, '"', end_ - pos_))
                    : nullptr;
    if (quote == nullptr) {
      pos_ = end_;
      if (!Fill()) return EndOfInput("a string", OffsetOf(mark_ + open));
      continue;
    }
    const size_t at = static_cast<size_t>(quote - buf_.data());
    // An odd run of backslashes before the quote escapes it.
    size_t backslashes = 0;
    while (at - backslashes > mark_ + open + 1 && buf_[at - backslashes - 1] == '\\') ++backslashes;
    pos_ = at + 1;
    if (backslashes % 2 == 0) return absl::OkStatus();
  }
}

// pos_ is at '{' or '['; leaves pos_ after the bracket that closes it.
absl::Status JsonEventSplitter::ScanNested() {
  size_t depth = 0;
  while (true) {
    if (pos_ == end_ && !Fill()) return EndOfInput("a value", OffsetOf(mark_));
    const char c = buf_[pos_];
    if (c == '"') {
      if (absl::Status s = ScanString(); !s.ok()) return s;
      continue;
    }
    ++pos_;
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return absl::OkStatus();
    }
  }
}

int JsonEventSplitter::SkipWhitespaceAndPeek() {
  while (true) {
    mark_ = pos_;
    const int c = Peek();
    if (!IsJsonWhitespace(c)) return c;
    ++pos_;
  }
}

bool JsonEventSplitter::Fill() {
  if (at_end_ || !io_error_.ok()) return false;
  if (mark_ > 0) {
    std::memmove(buf_.data(), buf_.data() + mark_, end_ - mark_);
    base_offset_ += mark_;
    pos_ -= mark_;
    end_ -= mark_;
    mark_ = 0;
  }
  if (end_ == buf_.size()) {
    if (buf_.size() >= kMaxValueBytes) {
      io_error_ = Error(mark_, absl::StrCat("a single value is larger than ", kMaxValueBytes >> 20,
                                            " MiB (corrupt trace?)"));
      return false;
    }
    buf_.resize(buf_.size() * 2);
  }
  absl::StatusOr<size_t> got = source_->Read(buf_.data() + end_, buf_.size() - end_);
  if (!got.ok()) {
    io_error_ = absl::Status(got.status().code(),
                             absl::StrCat("offset ", OffsetOf(end_), ": ", got.status().message()));
    return false;
  }
  if (*got == 0) {
    at_end_ = true;
    return false;
  }
  end_ += *got;
  return true;
}

absl::Status JsonEventSplitter::Error(size_t index, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat("offset ", OffsetOf(index), ": ", problem));
}

absl::Status JsonEventSplitter::EndOfInput(absl::string_view inside, uint64_t start) const {
  if (!io_error_.ok()) return io_error_;
  return absl::InvalidArgumentError(
      absl::StrCat("offset ", OffsetOf(end_), ": the file ends inside ", inside,
                   " that starts at offset ", start, " (truncated?)"));
}

}  // namespace flopscope::importer
