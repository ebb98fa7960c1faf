// The access model's one decision point: identity from the connection, job ownership from the
// catalog, session resume tokens.
#include "daemon/access/access_policy.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job_id.h"
#include "daemon/access/tls_identity.h"
#include "daemon/base/logger.h"
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

std::string OwnerTagOfUid(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  const bool named =
      getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr;
  return OwnerTag(named ? found->pw_name : "", uid);
}

bool MayAccessJob(const PeerIdentity& peer, uid_t owner, const AccessRules& rules) {
  // A node daemon's certificate is no user: it forwards (IdentifyWriter) and nothing else.
  if (peer.node_daemon) return false;
  if (peer.uid == owner || peer.uid == 0) return true;
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

absl::StatusOr<PeerIdentity> AccessControl::Identify(const grpc::ServerContextBase& context) const {
  std::optional<PeerIdentity> peer = peers_->Find(context.peer());
  if (peer) return *std::move(peer);
  // A verified client certificate (mutual TLS on --tcp): its subject says who.
  if (std::optional<absl::StatusOr<PeerIdentity>> tls =
          IdentityOfTlsPeer(*context.auth_context(), LookUpLocalUser)) {
    return *std::move(tls);
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the daemon cannot tell who is calling over ", context.peer(),
      ": plain TCP carries no identity and may reach no job; use the daemon's unix socket, or "
      "mutual TLS (flopscoped --tls-cert/--tls-key/--tls-ca, flopscope --server with a "
      "certificate)"));
}

absl::StatusOr<PeerIdentity> AccessControl::IdentifyWriter(
    const grpc::ServerContextBase& context) const {
  absl::StatusOr<PeerIdentity> caller = Identify(context);
  if (!caller.ok()) return caller;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kForwardedOwnerKey);
  if (it == metadata.end()) {
    if (!caller->node_daemon) return caller;
    return absl::PermissionDeniedError(
        absl::StrCat("a node daemon's certificate writes only the sessions it forwards, each "
                     "with its owner (",
                     kForwardedOwnerKey, "); this stream names none"));
  }
  uint32_t owner = 0;
  if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &owner) ||
      owner == kNoUid) {
    return absl::InvalidArgumentError(absl::StrCat(
        kForwardedOwnerKey, " must be a uid, got '",
        absl::string_view(it->second.data(), std::min<size_t>(it->second.size(), 32)), "'"));
  }
  // A user naming itself gains nothing: its stream is its own, not a forwarded one.
  if (owner == caller->uid && caller->uid != 0) return caller;
  if (caller->uid != 0 && !caller->node_daemon) {
    return absl::PermissionDeniedError(
        absl::StrCat("uid ", caller->uid, " may not forward a job as uid ", owner,
                     ": only a node daemon's certificate or root may"));
  }
  // The owner's own rights, no more: a forward into someone else's job is kept apart.
  PeerIdentity writer;
  writer.uid = owner;
  writer.gid = static_cast<gid_t>(-1);  // no group: an admin group cannot apply
  writer.pid = caller->pid;
  writer.forwarded_by = DescribePeer(*caller);
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
  if (!owner->has_value()) return absl::OkStatus();
  if (!MayAccessJob(peer, **owner, rules_)) return Denied(peer, job_id, **owner, access);
  // Root's or an admin's action on someone else's job: the log names who did it.
  if (peer.uid != **owner) {
    LogInfo("as root or admin, ", DescribePeer(peer), " may ", Verb(access), " job ", job_id,
            " of uid ", **owner);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> AccessControl::Claim(const PeerIdentity& peer,
                                              absl::string_view job_id) const {
  // The rate of new jobs is counted only for a job that does not exist yet. Forwarded streams
  // were counted by the node daemon where their jobs began.
  if (limits_ != nullptr && peer.forwarded_by.empty()) {
    absl::StatusOr<std::optional<uint32_t>> owner = catalog_->JobOwner(job_id, rules_.daemon_uid);
    if (!owner.ok()) return owner.status();
    if (owner->has_value()) return **owner;
    if (absl::Status s = limits_->AdmitNewJob(peer.uid, absl::Now()); !s.ok()) return s;
  }
  return catalog_->ClaimJob(job_id, peer.uid, rules_.daemon_uid);
}

absl::StatusOr<std::string> AccessControl::ClaimForWrite(const PeerIdentity& peer,
                                                         absl::string_view job_id) const {
  const std::string tag = OwnerTagOfUid(peer.uid);
  const std::string_view id(job_id.data(), job_id.size());  // common/job_id.h takes std's
  if (const std::string named(OwnerTagOf(id)); !named.empty()) {
    // An apart id is its owner's alone: nobody can take `4242@alice` before alice needs it.
    if (named != tag && named != absl::StrCat("uid", peer.uid)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "uid ", peer.uid, " may not write to job ", job_id, ": an id ending '@", named,
          "' holds the runs of user ", named, " kept apart from another user's job"));
    }
  }
  absl::StatusOr<uint32_t> owner = Claim(peer, job_id);
  if (!owner.ok()) return owner.status();
  if (*owner == peer.uid) return std::string(job_id);
  if (!OwnerTagOf(id).empty()) return Denied(peer, job_id, *owner, Access::kWrite);
  // Someone else's id: this run is kept apart, never refused and never mixed into theirs.
  const std::string apart = ApartJobId(id, tag);
  absl::StatusOr<uint32_t> apart_owner = Claim(peer, apart);
  if (!apart_owner.ok()) return apart_owner.status();
  if (*apart_owner != peer.uid) return Denied(peer, apart, *apart_owner, Access::kWrite);
  return apart;
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
  // Every job's apart runs, by the id they were kept apart from.
  absl::flat_hash_map<std::string, std::vector<std::string>> apart;
  for (const v1::JobInfo& job : *jobs) {
    const size_t at = job.job_id().find('@');
    if (at != std::string::npos) apart[job.job_id().substr(0, at)].push_back(job.job_id());
  }
  jobs->erase(std::remove_if(jobs->begin(), jobs->end(),
                             [&](const v1::JobInfo& job) {
                               const auto it = owners->find(job.job_id());
                               const uid_t owner =
                                   it == owners->end() ? rules_.daemon_uid : it->second;
                               return !MayAccessJob(peer, owner, rules_);
                             }),
              jobs->end());
  for (v1::JobInfo& job : *jobs) {
    const auto it = apart.find(job.job_id());
    if (it == apart.end()) continue;
    for (const std::string& id : it->second) job.add_kept_apart(id);
  }
  return absl::OkStatus();
}

absl::Status AccessControl::Denied(const PeerIdentity& peer, absl::string_view job_id, uid_t owner,
                                   Access access) const {
  const std::string admins = rules_.admin_gid
                                 ? absl::StrCat(", root or members of group ", rules_.admin_group)
                                 : std::string(" or root");
  // The caller's own run of this id, when one was kept apart, is what they are looking for.
  std::string own_run;
  if (!peer.node_daemon && OwnerTagOf(std::string_view(job_id.data(), job_id.size())).empty()) {
    const std::string apart =
        ApartJobId(std::string_view(job_id.data(), job_id.size()), OwnerTagOfUid(peer.uid));
    absl::StatusOr<std::optional<uint32_t>> apart_owner =
        catalog_->JobOwner(apart, rules_.daemon_uid);
    if (apart_owner.ok() && apart_owner->has_value() && **apart_owner == peer.uid) {
      own_run = absl::StrCat("; your own run of this job id was kept apart as job ", apart);
    }
  }
  // A certificate is named by its subject (a node's has no uid); a unix peer by its uid.
  const std::string who =
      peer.certificate.empty() ? absl::StrCat("uid ", peer.uid) : DescribePeer(peer);
  return absl::PermissionDeniedError(absl::StrCat(
      who, " may not ", Verb(access), " job ", job_id, ": it belongs to uid ", owner,
      "; only that user", admins, " may (flopscoped --admin-group names the group)", own_run));
}

}  // namespace flopscope::daemon
