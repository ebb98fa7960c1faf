// Client certificates of the mutual-TLS port mapped to identities (tls_identity.h).
#include "daemon/access/tls_identity.h"

#include <grp.h>
#include <grpc/grpc_security_constants.h>
#include <pwd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace flopscope::daemon {
namespace {

// Longer than any user name a host accepts (LOGIN_NAME_MAX is 256).
constexpr size_t kMaxUserName = 256;

std::vector<gid_t> GroupsOf(const char* user, gid_t primary) {
  std::vector<gid_t> groups(64);
  int count = static_cast<int>(groups.size());
  while (getgrouplist(user, primary, groups.data(), &count) < 0) {
    if (count <= static_cast<int>(groups.size()) || static_cast<size_t>(count) > kMaxGroups)
      return {};
    groups.resize(static_cast<size_t>(count));
  }
  groups.resize(static_cast<size_t>(count));
  return groups;
}

}  // namespace

std::optional<PeerIdentity> LookUpLocalUser(const std::string& user) {
  if (user.empty() || user.size() > kMaxUserName || user.find('\0') != std::string::npos) {
    return std::nullopt;
  }
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  PeerIdentity identity;
  identity.uid = found->pw_uid;
  identity.gid = found->pw_gid;
  identity.groups = GroupsOf(found->pw_name, found->pw_gid);
  return identity;
}

absl::StatusOr<PeerIdentity> IdentityOfSubject(const tls::CertificateSubject& subject,
                                               const UserLookup& lookup) {
  const std::vector<std::string>& units = subject.organizational_units;
  if (std::find(units.begin(), units.end(), kNodeDaemonUnit) != units.end()) {
    PeerIdentity node;
    node.uid = kNoUid;                  // no user: owns nothing, reads nothing (access_policy.h)
    node.gid = static_cast<gid_t>(-1);  // no group: an admin group cannot apply
    node.node_daemon = true;
    node.certificate = PrintableForTerminal(subject.one_line);
    return node;
  }
  const std::string shown = PrintableForTerminal(subject.common_name);
  if (subject.common_name.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the client certificate has no CN: a person's certificate must carry the "
                     "user name as CN, a node daemon's OU=",
                     kNodeDaemonUnit));
  }
  std::optional<PeerIdentity> user = lookup(subject.common_name);
  if (!user) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the client certificate's CN=", shown,
        " names no user on the daemon's host: a person's certificate must carry a local user "
        "name as CN (a node daemon's: OU=",
        kNodeDaemonUnit, ")"));
  }
  user->certificate = PrintableForTerminal(subject.one_line);
  return *std::move(user);
}

std::optional<absl::StatusOr<PeerIdentity>> IdentityOfTlsPeer(const grpc::AuthContext& auth,
                                                              const UserLookup& lookup) {
  if (!auth.IsPeerAuthenticated()) return std::nullopt;
  const std::vector<grpc::string_ref> pem =
      auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pem.empty()) return std::nullopt;
  absl::StatusOr<tls::CertificateSubject> subject =
      tls::SubjectOfPem(absl::string_view(pem.front().data(), pem.front().size()));
  if (!subject.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the client certificate is refused: ", subject.status().message()));
  }
  return IdentityOfSubject(*subject, lookup);
}

}  // namespace flopscope::daemon
