#pragma once

// Where a client command finds flopscoped: a unix socket (`--socket`, FLOPSCOPE_SOCKET, the
// node's or a personal daemon's), or a daemon's TCP port over mutual TLS (`--server HOST:PORT`
// or FLOPSCOPE_SERVER, with `--tls-cert/--tls-key/--tls-ca` or FLOPSCOPE_TLS_CERT/KEY/CA): an
// aggregator, or a node daemon on another host. Plain TCP is never used for a --server.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/connect/environment.h"
#include "common/tls/tls_files.h"

namespace flopscope::client {

// What the command line gave; empty: not given.
struct DaemonAddressFlags {
  std::string socket;
  std::string server;
  tls::TlsFilePaths tls;
};

// What DaemonClient connects to.
struct DaemonAddress {
  std::string socket;              // a socket path, a gRPC target, or the server's HOST:PORT
  std::optional<tls::TlsPem> tls;  // set for a server: mutual TLS with these files
};

// Flags win over variables: --server, else --socket, else FLOPSCOPE_SERVER, else
// FLOPSCOPE_SOCKET or the default socket (DefaultSocketPath). A server needs all three TLS files
// (each flag, else its variable), read and checked here; INVALID_ARGUMENT with the fix otherwise.
absl::StatusOr<DaemonAddress> ResolveDaemonAddress(const DaemonAddressFlags& flags,
                                                   const Environment& env);

}  // namespace flopscope::client
