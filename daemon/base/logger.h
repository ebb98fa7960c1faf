#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// "error", "warning" (or "warn"), "info", "debug".
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// Process-wide; safe to change while other threads log (an atomic).
void SetLogLevel(LogLevel level);
bool IsLogged(LogLevel level);

// One line to stderr, "flopscoped: [<level>: ]<message>", written with a single write(2) so that
// lines from concurrent streams never interleave. The message goes through PrintableForTerminal
// (common/utf8.h): control characters, line breaks and ill-formed bytes become U+FFFD, so text a
// client supplied can never forge a log line or send escapes to a terminal.
void Log(LogLevel level, absl::string_view message);
// The same without the prefix, for lines that name the program themselves (the start banner).
void LogUnprefixed(LogLevel level, absl::string_view message);

template <typename... Parts>
void LogInfo(const Parts&... parts) {
  if (IsLogged(LogLevel::kInfo)) Log(LogLevel::kInfo, absl::StrCat(parts...));
}
template <typename... Parts>
void LogWarning(const Parts&... parts) {
  if (IsLogged(LogLevel::kWarning)) Log(LogLevel::kWarning, absl::StrCat(parts...));
}
template <typename... Parts>
void LogError(const Parts&... parts) {
  if (IsLogged(LogLevel::kError)) Log(LogLevel::kError, absl::StrCat(parts...));
}
template <typename... Parts>
void LogDebug(const Parts&... parts) {
  if (IsLogged(LogLevel::kDebug)) Log(LogLevel::kDebug, absl::StrCat(parts...));
}

}  // namespace flopscope::daemon
