#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/access/peer_identity.h"
#include "daemon/access/peer_limits.h"
#include "daemon/catalog/catalog.h"
#include "flopscope/v1/query.pb.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Who may do what (docs/architecture.md, "Access model"), decided in this one place.
//
// A caller is the uid the kernel reported for its unix-socket connection
// (daemon/access/unix_acceptor.h); nothing a message says counts. A job belongs to the uid whose
// stream created it. Only that uid, root, or a member of the admin group (`--admin-group`, default
// `flopscope`) may read a job, prune it or open counter windows in it; only its owner writes to
// it. A job id is the owner's: another user's run that names it is kept apart as `<id>@<user>`
// (ClaimForWrite), never refused and never mixed in. A peer over mutual TLS is who its
// certificate says (daemon/access/tls_identity.h); a node daemon's certificate only forwards, as
// the owner of each job on its node; one over plain TCP has no identity and may touch no job
// (health checks only). A session is resumed only with its resume token.
//
// Hooking in an RPC: call CheckJobAccess(*context, job_id, Access::kRead) (or kWrite / kProfile)
// first thing in the handler and return its status when it is not OK; a listing filters with
// Identify + MayAccessJob.

enum class Access { kRead, kWrite, kProfile, kPrune };

// Metadata of a stream a node daemon forwards (docs/architecture.md, "Forwarding"): the uid that
// owns its job on the node, believed only from a node daemon's certificate or root.
inline constexpr char kForwardedOwnerKey[] = "flopscope-forwarded-owner-uid";

struct AccessRules {
  uid_t daemon_uid = 0;            // owns jobs listed before owners were recorded
  std::optional<gid_t> admin_gid;  // nullopt: no admin group
  std::string admin_group;         // its name, for messages
};

// Pure: may `peer` act on a job owned by `owner`? The owner, root, or an admin-group member
// (primary or supplementary group at connect time); never a node daemon's certificate.
bool MayAccessJob(const PeerIdentity& peer, uid_t owner, const AccessRules& rules);

// The owner tag (common/job_id.h) of `uid` on this host: its user name, else "uid<uid>".
std::string OwnerTagOfUid(uid_t uid);

// The rules for `admin_group` ("" for none): its gid when the group exists on this host.
AccessRules MakeAccessRules(const std::string& admin_group);

// Thread-safe: the registry and the catalog are, and the rules never change.
class AccessControl {
 public:
  // `limits` (may be null: none) bounds the new jobs a uid may create per minute.
  AccessControl(const PeerRegistry* peers, Catalog* catalog, AccessRules rules,
                PeerLimits* limits = nullptr)
      : peers_(peers), catalog_(catalog), rules_(std::move(rules)), limits_(limits) {}

  // The caller of a call, from its connection; PERMISSION_DENIED for a peer with no identity.
  absl::StatusOr<PeerIdentity> Identify(const grpc::ServerContextBase& context) const;
  // Who a Collector stream writes as: the caller, or for a stream a node daemon (or root)
  // forwards, the job's owner on the node (kForwardedOwnerKey), so that the aggregator's job has
  // its real owner; `forwarded_by` then names the forwarder. Anyone else may name only their
  // own uid there, and a node daemon's certificate writes nothing but forwarded streams.
  absl::StatusOr<PeerIdentity> IdentifyWriter(const grpc::ServerContextBase& context) const;

  // OK when the caller may do `access` to `job_id`, or the job does not exist (the handler says
  // NOT_FOUND); PERMISSION_DENIED naming the owner and who may otherwise.
  absl::Status CheckJobAccess(const grpc::ServerContext& context, absl::string_view job_id,
                              Access access) const;
  absl::Status CheckJobAccess(const PeerIdentity& peer, absl::string_view job_id,
                              Access access) const;

  // Before a stream writes to `job_id`: the job id its records are stored under. A new job
  // becomes `peer`'s (within the per-uid rate of new jobs, RESOURCE_EXHAUSTED beyond it); a job of
  // `peer`'s is written to; a job of another user's is left alone and the run is kept apart
  // under ApartJobId(job_id, peer's tag), `peer`'s job. An apart id may be written only by the
  // user it names. PERMISSION_DENIED otherwise.
  absl::StatusOr<std::string> ClaimForWrite(const PeerIdentity& peer,
                                            absl::string_view job_id) const;

  // Checks the resume token of `hello`'s session: the first hello's token (or, without one, a
  // token drawn here) is kept; later hellos must present it. Returns the token drawn here, to go
  // back in the Welcome ("" when the hello brought its own). PERMISSION_DENIED otherwise.
  absl::StatusOr<std::string> CheckResumeToken(const v1::SessionHello& hello,
                                               absl::string_view presented) const;

  // Leaves in `jobs` only those `peer` may read, and tells each the ids of other users' runs
  // kept apart from it (JobInfo.kept_apart).
  absl::Status FilterReadable(const PeerIdentity& peer, std::vector<v1::JobInfo>* jobs) const;

  const AccessRules& rules() const { return rules_; }

 private:
  absl::Status Denied(const PeerIdentity& peer, absl::string_view job_id, uid_t owner,
                      Access access) const;

  // Claims `job_id` for `peer` when nobody has it (counting it against the new-job rate);
  // returns its owner.
  absl::StatusOr<uint32_t> Claim(const PeerIdentity& peer, absl::string_view job_id) const;

  const PeerRegistry* peers_;
  Catalog* catalog_;
  const AccessRules rules_;
  PeerLimits* const limits_;
};

}  // namespace flopscope::daemon
