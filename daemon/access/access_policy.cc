// The access model's one decision point: identity from the connection, job ownership from the
// catalog, session resume tokens.
#include "daemon/access/access_policy.h"

#include <grp.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/access/tls_identity.h"
#include "daemon/base/resume_token.h"

namespace flopscope::daemon {
namespace {

const char* Verb(Access access) {
  switch (access) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write to";
    case Access::kProfile:
      return "open counter windows in";
    case Access::kPrune:
      return "prune";
  }
  return "use";
}

}  // namespace

bool MayAccessJob(const PeerIdentity& peer, uid_t owner, const AccessRules& rules) {
  if (peer.uid == owner || peer.uid == 0 || peer.node_daemon) return true;
  if (!rules.admin_gid) return false;
  return peer.gid == *rules.admin_gid ||
         std::find(peer.groups.begin(), peer.groups.end(), *rules.admin_gid) != peer.groups.end();
}

AccessRules MakeAccessRules(const std::string& admin_group) {
  AccessRules rules;
  rules.daemon_uid = geteuid();
  rules.admin_group = admin_group;
  if (admin_group.empty()) return rules;
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(admin_group.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    rules.admin_gid = found->gr_gid;
  }
  return rules;
}

absl::StatusOr<PeerIdentity> AccessControl::Identify(const grpc::ServerContext& context) const {
  std::optional<PeerIdentity> peer = peers_->Find(context.peer());
  if (peer) return *std::move(peer);
  // A verified client certificate (mutual TLS on --tcp): its subject says who.
  if (std::optional<absl::StatusOr<PeerIdentity>> tls =
          IdentityOfTlsPeer(*context.auth_context(), rules_.daemon_uid, LookUpLocalUser)) {
    return *std::move(tls);
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the daemon cannot tell who is calling over ", context.peer(),
      ": plain TCP carries no identity and may reach no job; use the daemon's unix socket, or "
      "mutual TLS (flopscoped --tls-cert/--tls-key/--tls-ca, flopscope --server with a "
      "certificate)"));
}

absl::StatusOr<PeerIdentity> AccessControl::IdentifyWriter(
    const grpc::ServerContext& context) const {
  absl::StatusOr<PeerIdentity> caller = Identify(context);
  if (!caller.ok()) return caller;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kForwardedOwnerKey);
  if (it == metadata.end()) return caller;
  uint32_t owner = 0;
  if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &owner)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kForwardedOwnerKey, " must be a uid, got '",
        absl::string_view(it->second.data(), std::min<size_t>(it->second.size(), 32)), "'"));
  }
  if (owner == caller->uid) return caller;
  if (caller->uid != 0 && !caller->node_daemon) {
    return absl::PermissionDeniedError(
        absl::StrCat("uid ", caller->uid, " may not forward a job as uid ", owner,
                     ": only a node daemon's certificate or root may"));
  }
  // The owner's own rights, no more: a forward into someone else's job is refused.
  PeerIdentity writer;
  writer.uid = owner;
  writer.gid = static_cast<gid_t>(-1);  // no group: an admin group cannot apply
  writer.pid = caller->pid;
  return writer;
}

absl::Status AccessControl::CheckJobAccess(const grpc::ServerContext& context,
                                           absl::string_view job_id, Access access) const {
  absl::StatusOr<PeerIdentity> peer = Identify(context);
  if (!peer.ok()) return peer.status();
  return CheckJobAccess(*peer, job_id, access);
}

absl::Status AccessControl::CheckJobAccess(const PeerIdentity& peer, absl::string_view job_id,
                                           Access access) const {
  absl::StatusOr<std::optional<uint32_t>> owner = catalog_->JobOwner(job_id, rules_.daemon_uid);
  if (!owner.ok()) return owner.status();
  if (!owner->has_value() || MayAccessJob(peer, **owner, rules_)) return absl::OkStatus();
  return Denied(peer, job_id, **owner, access);
}

absl::Status AccessControl::ClaimForWrite(const PeerIdentity& peer,
                                          absl::string_view job_id) const {
  absl::StatusOr<uint32_t> owner = catalog_->ClaimJob(job_id, peer.uid, rules_.daemon_uid);
  if (!owner.ok()) return owner.status();
  if (MayAccessJob(peer, *owner, rules_)) return absl::OkStatus();
  return Denied(peer, job_id, *owner, Access::kWrite);
}

absl::StatusOr<std::string> AccessControl::CheckResumeToken(const v1::SessionHello& hello,
                                                            absl::string_view presented) const {
  if (presented.size() > kMaxResumeTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("hello: resume token of ", presented.size(),
                                                   " bytes (at most ", kMaxResumeTokenBytes, ")"));
  }
  std::string drawn;
  if (presented.empty()) {
    absl::StatusOr<std::string> token = NewResumeToken();
    if (!token.ok()) return token.status();
    drawn = *std::move(token);
  }
  const std::string digest = ResumeTokenDigest(presented.empty() ? drawn : presented);
  absl::StatusOr<std::string> kept =
      catalog_->KeepFirstTokenDigest(hello.job_id(), hello.rank(), hello.session_id(), digest);
  if (!kept.ok()) return kept.status();
  if (SameDigest(*kept, digest)) return drawn;
  return absl::PermissionDeniedError(absl::StrCat(
      "session ", hello.session_id(), " of job ", hello.job_id(), " rank ", hello.rank(),
      " exists already: only the process holding its resume token (given at its first hello) "
      "may resume it; start a new session instead"));
}

absl::Status AccessControl::FilterReadable(const PeerIdentity& peer,
                                           std::vector<v1::JobInfo>* jobs) const {
  absl::StatusOr<absl::flat_hash_map<std::string, uint32_t>> owners =
      catalog_->JobOwners(rules_.daemon_uid);
  if (!owners.ok()) return owners.status();
  jobs->erase(std::remove_if(jobs->begin(), jobs->end(),
                             [&](const v1::JobInfo& job) {
                               const auto it = owners->find(job.job_id());
                               const uid_t owner =
                                   it == owners->end() ? rules_.daemon_uid : it->second;
                               return !MayAccessJob(peer, owner, rules_);
                             }),
              jobs->end());
  return absl::OkStatus();
}

absl::Status AccessControl::Denied(const PeerIdentity& peer, absl::string_view job_id, uid_t owner,
                                   Access access) const {
  const std::string admins = rules_.admin_gid
                                 ? absl::StrCat(", root or members of group ", rules_.admin_group)
                                 : std::string(" or root");
  return absl::PermissionDeniedError(absl::StrCat(
      "uid ", peer.uid, " may not ", Verb(access), " job ", job_id, ": it belongs to uid ", owner,
      "; only that user", admins, " may (flopscoped --admin-group names the group)"));
}

}  // namespace flopscope::daemon
