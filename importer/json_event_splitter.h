#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "importer/byte_source.h"

namespace flopscope::importer {

// Receives the pieces of a Chrome/Kineto trace as JsonEventSplitter finds them. Views are valid
// only during the call. `offset` is where the piece starts in the (decompressed) stream.
class JsonTraceVisitor {
 public:
  virtual ~JsonTraceVisitor() = default;
  // One element of the top-level "traceEvents" array (or of a top-level array).
  virtual absl::Status OnEvent(absl::string_view json, uint64_t offset) = 0;
  // Any other top-level member, its value as JSON text (`key` as written, escapes kept).
  virtual absl::Status OnMember(absl::string_view key, absl::string_view json, uint64_t offset) = 0;
};

// Cuts a trace into its events without building the document: memory is one read chunk plus the
// largest single event, whatever the file size. The splitter checks the document's outer grammar
// (the top-level object or array, keys, colons, commas, nothing after the end) and finds where
// each value ends by bracket and string tracking; the visitor parses and validates each value
// itself (simdjson, per event). Errors say "offset N: ..." with N in the decompressed stream.
//
// Accepts {"traceEvents": [...], other members...} (Kineto, any member order) and a bare array
// of events (Chrome's array format, which must still be closed: a missing ']' means truncation).
class JsonEventSplitter {
 public:
  // A single value larger than this is treated as corruption, not buffered.
  static constexpr size_t kMaxValueBytes = size_t{256} << 20;

  JsonEventSplitter(ByteSource* source, JsonTraceVisitor* visitor)
      : source_(source), visitor_(visitor) {}

  absl::Status Run();

  // Whether the document held an event array ("traceEvents", or the top level itself).
  bool saw_event_array() const { return saw_event_array_; }

 private:
  absl::Status ParseObjectMembers();
  absl::Status ParseEventArray();
  absl::Status ReadKey(std::string* key);
  // Finds the end of the value at pos_; *value views it in buf_ (valid until the next Fill).
  absl::Status ScanValue(absl::string_view* value, uint64_t* offset);
  absl::Status ScanString();
  absl::Status ScanNested();

  // Reads more input, first dropping the bytes before mark_; false at the end (or on an I/O
  // error, kept in io_error_).
  bool Fill();
  // The next byte (not consumed), or -1 at the end of the input.
  int Peek() {
    if (pos_ == end_ && !Fill()) return -1;
    return static_cast<unsigned char>(buf_[pos_]);
  }
  int SkipWhitespaceAndPeek();
  uint64_t OffsetOf(size_t index) const { return base_offset_ + index; }
  absl::Status Error(size_t index, absl::string_view problem) const;
  absl::Status EndOfInput(absl::string_view inside, uint64_t start) const;

  ByteSource* source_;
  JsonTraceVisitor* visitor_;
  std::vector<char> buf_;
  size_t pos_ = 0;            // next byte to look at
  size_t end_ = 0;            // end of the valid data
  size_t mark_ = 0;           // first byte that must survive a Fill
  uint64_t base_offset_ = 0;  // stream offset of buf_[0]
  bool at_end_ = false;
  bool saw_event_array_ = false;
  absl::Status io_error_;
};

}  // namespace flopscope::importer
