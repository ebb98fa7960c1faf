// The daemon's own accept loop on its unix socket: peer credentials first, then the fd to gRPC.
#include "daemon/access/unix_acceptor.h"

#include <errno.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/logger.h"

namespace flopscope::daemon {
namespace {

constexpr int kListenBacklog = 512;  // a whole node's ranks may connect at once
constexpr mode_t kSocketMode = 0666;

absl::Status SystemError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::StatusOr<int> BindAndListen(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof address.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemError("cannot create a socket for", path);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const absl::Status error = SystemError("cannot bind", path);
    close(fd);
    return error;
  }
  // After bind: until here the file had the umask's mode, never a wider one.
  if (chmod(path.c_str(), kSocketMode) != 0 || listen(fd, kListenBacklog) != 0) {
    const absl::Status error = SystemError("cannot listen on", path);
    close(fd);
    unlink(path.c_str());
    return error;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Start(const std::string& path,
                                                                  grpc::Server* server,
                                                                  PeerRegistry* peers) {
  absl::StatusOr<int> listen_fd = BindAndListen(path);
  if (!listen_fd.ok()) return listen_fd.status();
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(*listen_fd);
    return SystemError("cannot create the accept loop's eventfd for", path);
  }
  std::unique_ptr<UnixAcceptor> acceptor(new UnixAcceptor(*listen_fd, wake_fd, server, peers));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->AcceptLoop(); });
  return acceptor;
}

void UnixAcceptor::AcceptLoop() {
  pthread_setname_np(pthread_self(), "flopscoped-acc");
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogError("accept loop: poll failed: ", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Adopt(fd);
    } else if (errno == EMFILE || errno == ENFILE) {
      // Out of descriptors: the connection waits in the backlog; do not spin on it.
      LogWarning("accept: ", std::strerror(errno), "; retrying in 100 ms");
      poll(nullptr, 0, 100);
    }
  }
}

void UnixAcceptor::Adopt(int fd) {
  absl::StatusOr<PeerIdentity> identity = ReadPeerCredentials(fd);
  if (!identity.ok()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    LogWarning("refused a connection: ", identity.status().message());
    close(fd);
    return;
  }
  // Registered before gRPC sees the fd, so the connection's first call finds its identity; a
  // number reused from a closed connection gets this connection's identity (peer_identity.h).
  peers_->Register(fd, *std::move(identity));
  grpc::AddInsecureChannelFromFd(server_, fd);  // gRPC owns (and closes) the fd from here
}

void UnixAcceptor::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) LogWarning("accept loop: cannot wake it");
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

UnixAcceptor::~UnixAcceptor() { Stop(); }

}  // namespace flopscope::daemon
