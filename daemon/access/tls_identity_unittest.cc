// The mapping from a verified client certificate's subject to an identity (tls_identity.h).
#include "daemon/access/tls_identity.h"

#include <unistd.h>

#include "daemon/access/access_policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// A user database of one user, "alice" (uid 1234, groups 1234 and 50).
std::optional<PeerIdentity> OnlyAlice(const std::string& user) {
  if (user != "alice") return std::nullopt;
  PeerIdentity alice;
  alice.uid = 1234;
  alice.gid = 1234;
  alice.groups = {1234, 50};
  return alice;
}

tls::CertificateSubject Subject(std::string cn, std::vector<std::string> units = {}) {
  std::string one_line = "CN=" + cn;
  for (const std::string& unit : units) one_line += ",OU=" + unit;
  return tls::CertificateSubject{std::move(cn), std::move(units), std::move(one_line)};
}

TEST(TlsIdentityTest, PersonCertificateIsThatLocalUser) {
  absl::StatusOr<PeerIdentity> peer = IdentityOfSubject(Subject("alice"), OnlyAlice);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->uid, 1234u);
  EXPECT_EQ(peer->groups, (std::vector<gid_t>{1234, 50}));
  EXPECT_FALSE(peer->node_daemon);

  AccessRules rules;
  rules.admin_gid = 50;  // alice is in the admin group through her supplementary groups
  EXPECT_TRUE(MayAccessJob(*peer, 4321, rules));
  rules.admin_gid = 77;
  EXPECT_TRUE(MayAccessJob(*peer, 1234, rules));
  EXPECT_FALSE(MayAccessJob(*peer, 4321, rules));
}

// Reliability campaign row 4f: the node identity used to be the daemon's uid (0 on most nodes)
// with access to every job, so a person holding the node key could prune and profile anything.
TEST(TlsIdentityTest, NodeCertificateIsNoUserAndMayAccessNoJob) {
  absl::StatusOr<PeerIdentity> peer =
      IdentityOfSubject(Subject("node-7", {"training", kNodeDaemonUnit}), OnlyAlice);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_TRUE(peer->node_daemon);
  EXPECT_EQ(peer->uid, kNoUid);
  AccessRules rules;
  rules.daemon_uid = 0;
  for (uid_t owner : {uid_t{0}, uid_t{1234}, uid_t{4321}}) {
    EXPECT_FALSE(MayAccessJob(*peer, owner, rules)) << owner;
  }
  EXPECT_EQ(DescribePeer(*peer), "node certificate CN=node-7,OU=training,OU=flopscope-node");
}

TEST(TlsIdentityTest, APersonIsNamedByCertificateInTheLog) {
  absl::StatusOr<PeerIdentity> peer = IdentityOfSubject(Subject("alice"), OnlyAlice);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(DescribePeer(*peer), "certificate CN=alice (uid 1234)");
}

TEST(TlsIdentityTest, NodeUnitMustMatchExactly) {
  // "flopscope-node-x" is not the node unit: the CN is then read as a user name.
  absl::StatusOr<PeerIdentity> peer =
      IdentityOfSubject(Subject("alice", {"flopscope-node-x"}), OnlyAlice);
  ASSERT_TRUE(peer.ok());
  EXPECT_FALSE(peer->node_daemon);
  EXPECT_EQ(peer->uid, 1234u);
}

TEST(TlsIdentityTest, UnknownOrMissingNameHasNoIdentity) {
  absl::StatusOr<PeerIdentity> peer = IdentityOfSubject(Subject("mallory"), OnlyAlice);
  EXPECT_EQ(peer.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(peer.status().message(), HasSubstr("CN=mallory names no user"));

  peer = IdentityOfSubject(Subject(""), OnlyAlice);
  EXPECT_EQ(peer.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(peer.status().message(), HasSubstr("has no CN"));
}

TEST(TlsIdentityTest, ControlCharactersInTheNameAreNotEchoedRaw) {
  absl::StatusOr<PeerIdentity> peer = IdentityOfSubject(Subject("evil\x1b[2J"), OnlyAlice);
  ASSERT_FALSE(peer.ok());
  EXPECT_THAT(std::string(peer.status().message()), ::testing::Not(HasSubstr("\x1b")));
}

TEST(TlsIdentityTest, LocalUserDatabase) {
  std::optional<PeerIdentity> root = LookUpLocalUser("root");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  EXPECT_FALSE(LookUpLocalUser("no-such-user-flopscope").has_value());
  EXPECT_FALSE(LookUpLocalUser("").has_value());
  EXPECT_FALSE(LookUpLocalUser(std::string("ro\0ot", 5)).has_value());
}

}  // namespace
}  // namespace flopscope::daemon
