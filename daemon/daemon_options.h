#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/logger.h"

namespace CLI {
class App;
}  // namespace CLI

namespace flopscope::daemon {

inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

// How flopscoped runs; main() fills it from the command line, tests build it directly.
struct DaemonOptions {
  std::string data_dir;     // empty: DefaultDataDir()
  std::string socket_path;  // empty: flopscope::DefaultSocketPath()
  std::string tcp_address;  // HOST:PORT, empty for none; needs insecure_loopback_tcp
  bool insecure_loopback_tcp = false;
  LogLevel log_level = LogLevel::kInfo;
  int max_receive_message_bytes = kMaxReceiveMessageBytes;
  // How long SIGTERM waits for open streams before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(3);
};

// $FLOPSCOPE_DATA_DIR, else /var/lib/flopscope when it is (or can be made) writable, else
// $XDG_DATA_HOME/flopscope, else ~/.local/share/flopscope.
std::string DefaultDataDir();

// Plain TCP is served only on loopback and only when asked for explicitly: there is no TLS yet.
// Accepts 127.0.0.1:PORT, [::1]:PORT (or ::1:PORT) and localhost:PORT; returns the address in
// the form gRPC listens on.
absl::StatusOr<std::string> LoopbackTcpAddress(absl::string_view address,
                                               bool insecure_loopback_tcp);

// Registers --data-dir, --socket, --tcp, --insecure-loopback-tcp and --log-level.
void AddDaemonFlags(CLI::App& app, DaemonOptions* options, std::string* log_level);

// Fills in defaults and checks the combination: what main() calls after parsing.
absl::Status ResolveDaemonOptions(const std::string& log_level, DaemonOptions* options);

}  // namespace flopscope::daemon
