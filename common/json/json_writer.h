#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flopscope {

// The one JSON writer of the tree: the client's machine-readable output (`--format json`) and the
// JSON text the daemon stores (kernel_flops.tensor). Streaming: it inserts commas and indentation
// itself, escapes every string (control characters, quotes, backslashes) and replaces invalid
// UTF-8 (common/utf8.h) with U+FFFD, so the output is always valid JSON whatever the producer
// sent. Misuse (a value where a key is due, unbalanced nesting) is a programming error and
// asserts. No dependency beyond the standard library and flopscope_common.
class JsonWriter {
 public:
  // indent_width 0 writes everything on one line.
  explicit JsonWriter(int indent_width = 2) : indent_width_(indent_width) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  // Shortest text that reads back as the same double; NaN and infinities become null.
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // The document so far, with a trailing newline once every container is closed.
  std::string Finish() const;

  // `text` as a quoted JSON string literal.
  static std::string Quote(std::string_view text);

 private:
  enum class Scope { kObject, kArray };
  struct Level {
    Scope scope;
    int items = 0;
    bool key_pending = false;  // a key was written, its value is due
  };

  void BeforeValue();
  void Open(Scope scope, char bracket);
  void Close(Scope scope, char bracket);
  void NewLine();

  int indent_width_;
  std::string out_;
  std::vector<Level> stack_;
  bool root_written_ = false;
};

}  // namespace flopscope
