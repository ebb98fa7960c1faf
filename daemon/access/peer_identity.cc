// Peer credentials of unix-socket connections (SO_PEERCRED, SO_PEERGROUPS) and the registry that
// maps gRPC's "fd:N" peer names back to them.
#include "daemon/access/peer_identity.h"

#include <errno.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

constexpr absl::string_view kFdPrefix = "fd:";

// The peer's supplementary groups; an empty list when the kernel cannot say (before Linux 4.13),
// which only means fewer admins are recognised.
std::vector<gid_t> ReadPeerGroups(int fd) {
  std::vector<gid_t> groups(64);
  while (true) {
    socklen_t length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) == 0) {
      groups.resize(length / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE || length / sizeof(gid_t) > kMaxGroups ||
        length / sizeof(gid_t) <= groups.size()) {
      return {};
    }
    groups.resize(length / sizeof(gid_t));
  }
}

}  // namespace

absl::StatusOr<PeerIdentity> ReadPeerCredentials(int fd) {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0 ||
      length != sizeof credentials) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the peer's credentials (SO_PEERCRED): ", std::strerror(errno)));
  }
  PeerIdentity identity;
  identity.uid = credentials.uid;
  identity.gid = credentials.gid;
  identity.pid = credentials.pid;
  identity.groups = ReadPeerGroups(fd);
  return identity;
}

std::string DescribePeer(const PeerIdentity& peer) {
  if (!peer.forwarded_by.empty()) {
    return absl::StrCat("uid ", peer.uid, " forwarded by ", peer.forwarded_by);
  }
  if (peer.node_daemon) return absl::StrCat("node certificate ", peer.certificate);
  if (!peer.certificate.empty()) {
    return absl::StrCat("certificate ", peer.certificate, " (uid ", peer.uid, ")");
  }
  return absl::StrCat("uid ", peer.uid, " pid ", peer.pid);
}

std::optional<int> FdOfPeer(absl::string_view peer) {
  if (peer.substr(0, kFdPrefix.size()) != kFdPrefix) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(kFdPrefix.size()), &fd) || fd < 0) return std::nullopt;
  return fd;
}

void PeerRegistry::Register(int fd, PeerIdentity identity) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = std::move(identity);
}

std::optional<PeerIdentity> PeerRegistry::Find(absl::string_view peer) const {
  const std::optional<int> fd = FdOfPeer(peer);
  if (!fd) return std::nullopt;
  absl::MutexLock lock(&mu_);
  const auto it = by_fd_.find(*fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

}  // namespace flopscope::daemon
