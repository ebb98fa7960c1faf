#pragma once

#include <cstddef>
#include <string>
#include <string_view>

// The one implementation of the UTF-8 rules (RFC 3629) for all three programs and the injector
// core: std::string_view only, no other dependency. Callers keep their own policy on top of it
// (replace or reject; NUL allowed or not): the injector and the importer replace, the daemon
// rejects, the client's JSON writer escapes and the client's text views make text printable.
//
// Everything here treats its input as untrusted bytes: producer names (range, module, kernel,
// host, command) come from the profiled job or from third-party trace files.

namespace flopscope {

// Length of the well-formed UTF-8 sequence at the start of `text` (1 to 4), or 0 when `text` is
// empty or starts with an ill-formed one: a stray continuation byte, a truncated sequence, an
// overlong form, a UTF-16 surrogate or a value above U+10FFFF. NUL is a well-formed sequence.
size_t Utf8SequenceLength(std::string_view text);

// True when every byte of `text` belongs to a well-formed sequence.
bool IsValidUtf8(std::string_view text);

// Appends `text` to `out`, replacing each byte that does not start a well-formed sequence with
// U+FFFD (one replacement per byte, so the count of bad bytes stays visible).
void AppendSanitizedUtf8(std::string_view text, std::string* out);

// Appends the NUL-terminated wide string (UTF-32 on Linux) as UTF-8; code points that are not
// Unicode scalar values become U+FFFD. A null pointer appends nothing.
void AppendWideAsUtf8(const wchar_t* text, std::string* out);

// Cuts `text` to at most `max_bytes` without splitting a multi-byte sequence (the cut moves back
// over continuation bytes; for well-formed text the result is well-formed).
void TruncateUtf8(size_t max_bytes, std::string* text);

// `text` made safe to write to a terminal, for every human-readable view of producer text:
// ill-formed bytes and every control character (C0 0x00-0x1F, DEL 0x7F, C1 U+0080-U+009F)
// become U+FFFD, so no escape sequence (ESC, CSI) or line break from a producer ever reaches the
// terminal raw; a tab becomes one space (one visible column, like every other replacement, so
// tables stay aligned). Well-formed printable text, non-ASCII included, passes unchanged; so do
// Unicode format characters such as bidi overrides (they reorder text but send no command).
std::string PrintableForTerminal(std::string_view text);

}  // namespace flopscope
