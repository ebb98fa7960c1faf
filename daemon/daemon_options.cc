#include "daemon/daemon_options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/endpoint.h"

namespace flopscope::daemon {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

constexpr char kSystemDataDir[] = "/var/lib/flopscope";

bool SystemDataDirUsable() {
  if (access(kSystemDataDir, F_OK) == 0) return access(kSystemDataDir, W_OK | X_OK) == 0;
  return access("/var/lib", W_OK | X_OK) == 0;  // we could create it (running as root)
}

constexpr char kTlsMissing[] =
    "TLS is not implemented yet, so plain TCP is served only on loopback (127.0.0.1, ::1 or "
    "localhost) with --insecure-loopback-tcp; use the unix socket otherwise";

}  // namespace

std::string DefaultDataDir() {
  if (std::string dir = Env("FLOPSCOPE_DATA_DIR"); !dir.empty()) return dir;
  if (SystemDataDirUsable()) return kSystemDataDir;
  if (std::string xdg = Env("XDG_DATA_HOME"); !xdg.empty()) return xdg + "/flopscope";
  std::string home = Env("HOME");
  if (home.empty()) home = ".";
  return home + "/.local/share/flopscope";
}

absl::StatusOr<std::string> LoopbackTcpAddress(absl::string_view address,
                                               bool insecure_loopback_tcp) {
  if (!insecure_loopback_tcp) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, " needs --insecure-loopback-tcp: ", kTlsMissing));
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, ": expected HOST:PORT, e.g. 127.0.0.1:7070"));
  }
  const absl::string_view host = address.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, ": the port must be a number from 0 to 65535"));
  }
  if (host == "::1") return absl::StrCat("[::1]:", port);  // the form gRPC parses
  if (host != "127.0.0.1" && host != "[::1]" && host != "localhost") {
    return absl::InvalidArgumentError(absl::StrCat("--tcp ", address, ": ", kTlsMissing));
  }
  return std::string(address);
}

void AddDaemonFlags(CLI::App& app, DaemonOptions* options, std::string* log_level) {
  app.add_option("--data-dir", options->data_dir,
                 "where job data lives (default: $FLOPSCOPE_DATA_DIR, else /var/lib/flopscope "
                 "when writable, else $XDG_DATA_HOME/flopscope or ~/.local/share/flopscope)");
  app.add_option("--socket", options->socket_path,
                 "unix socket to serve (default: $FLOPSCOPE_SOCKET, else "
                 "/run/flopscope/flopscope.sock, $XDG_RUNTIME_DIR or the temp dir)");
  app.add_option("--tcp", options->tcp_address,
                 "also serve plain TCP on HOST:PORT (loopback only, with "
                 "--insecure-loopback-tcp; TLS is not implemented yet)");
  app.add_flag("--insecure-loopback-tcp", options->insecure_loopback_tcp,
               "allow --tcp without TLS on a loopback address");
  app.add_option("--log-level", *log_level, "error, warning, info or debug")->default_val("info");
}

absl::Status ResolveDaemonOptions(const std::string& log_level, DaemonOptions* options) {
  absl::StatusOr<LogLevel> level = ParseLogLevel(log_level);
  if (!level.ok()) return level.status();
  options->log_level = *level;
  if (options->data_dir.empty()) options->data_dir = DefaultDataDir();
  if (options->socket_path.empty()) options->socket_path = DefaultSocketPath();
  if (options->socket_path.rfind("unix:", 0) == 0) options->socket_path.erase(0, 5);
  // Absolute, so that log lines and the gRPC target mean the same whatever the working directory.
  std::error_code ignored;
  options->data_dir = std::filesystem::absolute(options->data_dir, ignored).string();
  options->socket_path = std::filesystem::absolute(options->socket_path, ignored).string();
  if (options->insecure_loopback_tcp && options->tcp_address.empty()) {
    return absl::InvalidArgumentError("--insecure-loopback-tcp needs --tcp HOST:PORT");
  }
  if (options->tcp_address.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> tcp =
      LoopbackTcpAddress(options->tcp_address, options->insecure_loopback_tcp);
  if (!tcp.ok()) return tcp.status();
  options->tcp_address = *std::move(tcp);
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
