#include "daemon/base/logger.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "common/utf8.h"

namespace flopscope::daemon {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* Prefix(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "flopscoped: error: ";
    case LogLevel::kWarning:
      return "flopscoped: warning: ";
    case LogLevel::kDebug:
      return "flopscoped: debug: ";
    case LogLevel::kInfo:
      break;
  }
  return "flopscoped: ";
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "error") return LogLevel::kError;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "debug") return LogLevel::kDebug;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level '", name, "' (expected error, warning, info or debug)"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool IsLogged(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void Log(LogLevel level, absl::string_view message) {
  LogUnprefixed(level, absl::StrCat(Prefix(level), message));
}

void LogUnprefixed(LogLevel level, absl::string_view message) {
  if (!IsLogged(level)) return;
  // Messages carry client-supplied text (job ids, hosts, session ids, names): a newline or an
  // escape sequence in it must not forge a line or reach an operator's terminal raw.
  const std::string line =
      absl::StrCat(PrintableForTerminal(std::string_view(message.data(), message.size())), "\n");
  // One write per line: concurrent writers to stderr never interleave within a line. A failed
  // write (stderr closed) is not worth failing the daemon for.
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

}  // namespace flopscope::daemon
