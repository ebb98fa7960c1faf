// Choosing the daemon a client command talks to, and its TLS files (daemon_address.h).
#include "client/connect/daemon_address.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/endpoint.h"

namespace flopscope::client {
namespace {

constexpr char kTlsHelp[] =
    "give --tls-cert, --tls-key and --tls-ca (or FLOPSCOPE_TLS_CERT, FLOPSCOPE_TLS_KEY, "
    "FLOPSCOPE_TLS_CA): your certificate, its key and the CA that signed the daemon's "
    "(deploy/tls/make_test_ca.sh makes test ones)";

absl::Status CheckServer(const std::string& server) {
  const size_t colon = server.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(server.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server ", server, ": expected HOST:PORT, e.g. aggregator.example:7070"));
  }
  return absl::OkStatus();
}

std::string FlagOrEnv(const std::string& flag, const Environment& env, const char* name) {
  return flag.empty() ? env.GetNonEmpty(name).value_or("") : flag;
}

}  // namespace

absl::StatusOr<DaemonAddress> ResolveDaemonAddress(const DaemonAddressFlags& flags,
                                                   const Environment& env) {
  if (!flags.socket.empty() && !flags.server.empty()) {
    return absl::InvalidArgumentError(
        "give --socket (a daemon on this host) or --server (one over TCP), not both");
  }
  std::string server = flags.server;
  if (server.empty() && flags.socket.empty()) {
    server = env.GetNonEmpty("FLOPSCOPE_SERVER").value_or("");
  }
  DaemonAddress address;
  if (server.empty()) {
    if (flags.tls.any()) {
      return absl::InvalidArgumentError(
          "--tls-cert, --tls-key and --tls-ca are for --server HOST:PORT; a unix socket needs "
          "none");
    }
    address.socket = flags.socket.empty() ? DefaultSocketPath() : flags.socket;
    return address;
  }
  if (absl::Status s = CheckServer(server); !s.ok()) return s;
  const tls::TlsFilePaths paths{FlagOrEnv(flags.tls.cert, env, "FLOPSCOPE_TLS_CERT"),
                                FlagOrEnv(flags.tls.key, env, "FLOPSCOPE_TLS_KEY"),
                                FlagOrEnv(flags.tls.ca, env, "FLOPSCOPE_TLS_CA")};
  if (!paths.any()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--server ", server, " is reached only over mutual TLS, never plain TCP: ", kTlsHelp));
  }
  absl::StatusOr<tls::TlsPem> pem = tls::LoadTlsFiles(paths);
  if (!pem.ok()) return pem.status();
  address.socket = server;
  address.tls = *std::move(pem);
  return address;
}

}  // namespace flopscope::client
