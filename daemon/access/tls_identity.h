#pragma once

// Who a verified client certificate speaks for, on flopscoped's mutual-TLS port (`--tcp` with
// `--tls-cert/--tls-key/--tls-ca`; docs/architecture.md, "Access model"). gRPC has checked the
// certificate against --tls-ca during the handshake; this maps its subject to an identity:
//   - OU=flopscope-node: a node daemon, which may only forward the sessions its local daemon
//     accepted, each as its job's owner there; it reads, prunes and profiles nothing;
//   - otherwise CN=<user name>: that local user (uid, primary and supplementary groups from the
//     host's user database), so a person's certificate gets exactly that person's access;
//   - a CN naming no user here, no CN, or more than one CN: no identity (every job call is
//     denied).

#include <grpcpp/grpcpp.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/tls/tls_files.h"
#include "daemon/access/peer_identity.h"

namespace flopscope::daemon {

// The organizational unit that marks a node daemon's certificate.
inline constexpr char kNodeDaemonUnit[] = "flopscope-node";

// A local user's identity by name; nullopt when the host has no such user.
using UserLookup = std::function<std::optional<PeerIdentity>(const std::string& user)>;

// The host's user database (getpwnam_r, getgrouplist).
std::optional<PeerIdentity> LookUpLocalUser(const std::string& user);

// Pure: the identity a certificate with `subject` gets. A node daemon gets kNoUid and
// node_daemon set (what it writes belongs to the owner it forwards for). PERMISSION_DENIED,
// saying why and what certificate would do, otherwise.
absl::StatusOr<PeerIdentity> IdentityOfSubject(const tls::CertificateSubject& subject,
                                               const UserLookup& lookup);

// The identity of a call's TLS peer from its auth context; nullopt when the call did not come
// over TLS with a verified certificate (a unix-socket or plain-TCP call).
std::optional<absl::StatusOr<PeerIdentity>> IdentityOfTlsPeer(const grpc::AuthContext& auth,
                                                              const UserLookup& lookup);

}  // namespace flopscope::daemon
