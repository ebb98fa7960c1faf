#include "injector/warn.h"

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace flopscope::injector {

namespace {
// Long enough for any message of ours; a longer one is cut and ends with "...".
constexpr size_t kMaxWarningBytes = 1024;
constexpr std::string_view kPrefix = "flopscope: ";
}  // namespace

void Warn(std::string_view text) {
  char line[kPrefix.size() + kMaxWarningBytes + 4];
  size_t n = 0;
  for (char c : kPrefix) line[n++] = c;
  const bool cut = text.size() > kMaxWarningBytes;
  for (char c : text.substr(0, kMaxWarningBytes)) {
    const auto byte = static_cast<unsigned char>(c);
    // C0 controls and DEL become '?'; bytes >= 0x80 pass (UTF-8 of names).
    line[n++] = (byte < 0x20 || byte == 0x7f) ? '?' : c;
  }
  if (cut) {
    for (char c : std::string_view("...")) line[n++] = c;
  }
  line[n++] = '\n';
  // One write(2): atomic for pipes up to PIPE_BUF, never interleaved mid-line. Retried on EINTR;
  // a short or failed write is ignored on purpose (stderr is the last place to report to).
  size_t off = 0;
  while (off < n) {
    const ssize_t w = ::write(STDERR_FILENO, line + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

}  // namespace flopscope::injector
