#pragma once

#include <string>
#include <string_view>

namespace flopscope::injector {

// Protobuf refuses to parse a string field that is not valid UTF-8, and one bad range name would
// make the daemon reject a whole batch. Every name and metadata text therefore passes through
// these before it leaves the injector.

// Appends `text` to `out`, replacing each invalid UTF-8 sequence with U+FFFD.
void AppendSanitizedUtf8(std::string_view text, std::string* out);

// Appends the NUL-terminated wide string (UTF-32 on Linux) as UTF-8; code points that are not
// Unicode scalar values become U+FFFD. A null pointer appends nothing.
void AppendWideAsUtf8(const wchar_t* text, std::string* out);

// Cuts `text` to at most `max_bytes` without splitting a multi-byte sequence.
void TruncateUtf8(size_t max_bytes, std::string* text);

}  // namespace flopscope::injector
