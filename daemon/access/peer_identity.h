#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace flopscope::daemon {

// More supplementary groups than Linux's NGROUPS_MAX (65536) a user cannot have: the bound on a
// group list read from the kernel or the group database.
inline constexpr size_t kMaxGroups = 65536;

// Who is at the other end of a unix-socket connection, as the kernel says (SO_PEERCRED and
// SO_PEERGROUPS, read when the connection was accepted), never as a message claims.
struct PeerIdentity {
  uid_t uid = 0;
  gid_t gid = 0;              // the peer's primary group when it connected
  std::vector<gid_t> groups;  // its supplementary groups then
  pid_t pid = 0;
  // A node daemon's client certificate on the mutual-TLS port (daemon/access/tls_identity.h): may
  // only forward sessions its local daemon accepted, each as the job's owner on the node
  // (AccessControl::IdentifyWriter). It reads, prunes and profiles nothing; its uid is kNoUid.
  bool node_daemon = false;
  // The verified client certificate's subject ("CN=alice", "OU=flopscope-node,CN=node-7"); empty
  // for a unix-socket peer. Named in the log beside every privileged action.
  std::string certificate;
  // Set on the identity a forwarded stream writes as (AccessControl::IdentifyWriter): who
  // forwarded it ("node certificate ..."), for the log and the per-peer limits.
  std::string forwarded_by;
};

// The uid of an identity that is no user (a node daemon's certificate): owns no job, is never
// root, and a job's owner can never equal it (the kernel reserves (uid_t)-1).
inline constexpr uid_t kNoUid = static_cast<uid_t>(-1);

// Who did something, for the log: "uid 1001 pid 4242" for a unix-socket peer, "certificate
// CN=alice (uid 1001)" or "node certificate OU=flopscope-node,CN=node-7" for a TLS one.
std::string DescribePeer(const PeerIdentity& peer);

// The kernel's credentials of the peer of the connected unix socket `fd`.
absl::StatusOr<PeerIdentity> ReadPeerCredentials(int fd);

// The connection's fd number in a gRPC peer string: gRPC names a connection handed to it with
// AddInsecureChannelFromFd "fd:N"; nullopt for any other peer ("ipv4:...", "unix:...").
std::optional<int> FdOfPeer(absl::string_view peer);

// The identities of the unix connections the daemon accepted, by fd number: the acceptor
// registers each connection before handing it to gRPC, and a handler finds its caller from
// ServerContext::peer() ("fd:N").
//
// Hazard: gRPC closes a connection's fd when the connection ends, and the kernel hands the number
// to the next accept. Register replaces the entry then, so a new connection never inherits an old
// identity; entries of closed connections are never consulted (no call arrives on a closed
// connection) and are overwritten when their number comes back. What remains: a call whose
// connection closed after the call arrived and whose number was taken by another connection
// before the handler looked its caller up would be seen as that connection's peer. Handlers look
// their caller up first, before any effect, and the caller's own connection is closed, so no
// answer reaches it (docs/architecture.md, "Access model").
//
// Thread-safe.
class PeerRegistry {
 public:
  void Register(int fd, PeerIdentity identity) ABSL_LOCKS_EXCLUDED(mu_);
  // The identity of the connection a call came in on; nullopt for a peer that is not an accepted
  // unix connection (plain TCP) or an unknown fd.
  std::optional<PeerIdentity> Find(absl::string_view peer) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, PeerIdentity> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flopscope::daemon
