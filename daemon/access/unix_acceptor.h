#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/access/peer_identity.h"

namespace flopscope::daemon {

// The daemon's unix socket, accepted by the daemon itself rather than by gRPC, because gRPC
// (1.51) does not tell a handler who its peer is: each connection's credentials are read from the
// kernel (ReadPeerCredentials) and registered under its fd number (PeerRegistry) before the fd is
// handed to the gRPC server (AddInsecureChannelFromFd), whose handlers then see the peer "fd:N".
//
// The socket file is mode 0666: every user's job must reach the node's daemon, and what a caller
// may do is decided per call from its uid (daemon/access/access_policy.h). A connection whose
// credentials cannot be read is closed at once and counted.
class UnixAcceptor {
 public:
  // Binds and listens on `path` (which PrepareSocketPath made ready) and starts the accepting
  // thread, which serves `server` until Stop. `server` and `peers` must outlive the acceptor.
  static absl::StatusOr<std::unique_ptr<UnixAcceptor>> Start(const std::string& path,
                                                             grpc::Server* server,
                                                             PeerRegistry* peers);
  ~UnixAcceptor();  // Stop()
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Stops accepting and closes the listening socket (connections already handed to gRPC stay
  // gRPC's). Call before the server shuts down. Idempotent.
  void Stop();

  // Connections refused because their peer's credentials could not be read.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  UnixAcceptor(int listen_fd, int wake_fd, grpc::Server* server, PeerRegistry* peers)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), server_(server), peers_(peers) {}
  void AcceptLoop();
  // Registers one accepted connection and hands it to gRPC, or closes it.
  void Adopt(int fd);

  int listen_fd_;
  int wake_fd_;  // an eventfd: written by Stop to end AcceptLoop's poll
  grpc::Server* server_;
  PeerRegistry* peers_;
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace flopscope::daemon
