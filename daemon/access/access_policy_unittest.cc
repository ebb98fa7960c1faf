// The access model's parts: the policy (who may act on whose job), peer credentials from the
// kernel, the fd registry, resume tokens, and the whole path through a running daemon (unix
// socket: identified; plain TCP: no identity, no job).
#include "daemon/access/access_policy.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "daemon/access/peer_identity.h"
#include "daemon/access/peer_limits.h"
#include "daemon/base/resume_token.h"
#include "daemon/catalog/catalog.h"
#include "daemon/server/daemon_server.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/collector.grpc.pb.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kAlice = 1001;
constexpr uid_t kMallory = 1002;
constexpr gid_t kAdmins = 4242;

PeerIdentity Peer(uid_t uid, gid_t gid = 100, std::vector<gid_t> groups = {}) {
  PeerIdentity peer;
  peer.uid = uid;
  peer.gid = gid;
  peer.groups = std::move(groups);
  return peer;
}

AccessRules Rules() {
  AccessRules rules;
  rules.daemon_uid = 0;
  rules.admin_gid = kAdmins;
  rules.admin_group = "flopscope";
  return rules;
}

TEST(MayAccessJobTest, OwnerRootAndAdminsOnly) {
  const AccessRules rules = Rules();
  EXPECT_TRUE(MayAccessJob(Peer(kAlice), kAlice, rules));
  EXPECT_TRUE(MayAccessJob(Peer(0), kAlice, rules));
  EXPECT_FALSE(MayAccessJob(Peer(kMallory), kAlice, rules));
  EXPECT_TRUE(MayAccessJob(Peer(kMallory, kAdmins), kAlice, rules));            // primary group
  EXPECT_TRUE(MayAccessJob(Peer(kMallory, 100, {7, kAdmins}), kAlice, rules));  // supplementary
  AccessRules no_admins = rules;
  no_admins.admin_gid.reset();
  EXPECT_FALSE(MayAccessJob(Peer(kMallory, kAdmins), kAlice, no_admins));
}

TEST(PeerRegistryTest, FindsByFdPeerAndANewConnectionReplacesAnOldOne) {
  EXPECT_EQ(FdOfPeer("fd:12"), 12);
  EXPECT_EQ(FdOfPeer("ipv4:127.0.0.1:5000"), std::nullopt);
  EXPECT_EQ(FdOfPeer("fd:"), std::nullopt);
  EXPECT_EQ(FdOfPeer("fd:-3"), std::nullopt);
  PeerRegistry peers;
  EXPECT_FALSE(peers.Find("fd:12").has_value());
  peers.Register(12, Peer(kAlice));
  ASSERT_TRUE(peers.Find("fd:12").has_value());
  EXPECT_EQ(peers.Find("fd:12")->uid, kAlice);
  EXPECT_FALSE(peers.Find("ipv4:127.0.0.1:5000").has_value());
  // fd 12 closed and the number came back with another user's connection.
  peers.Register(12, Peer(kMallory));
  EXPECT_EQ(peers.Find("fd:12")->uid, kMallory);
}

TEST(PeerCredentialsTest, TheKernelSaysWhoConnected) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  absl::StatusOr<PeerIdentity> peer = ReadPeerCredentials(pair[0]);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->uid, getuid());
  EXPECT_EQ(peer->gid, getgid());
  EXPECT_EQ(peer->pid, getpid());
  close(pair[0]);
  close(pair[1]);
}

// A process that changed its uid is seen as its new uid: what a message could claim counts for
// nothing. Needs root to change uid.
TEST(PeerCredentialsTest, AnotherUsersConnectionCarriesItsUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  fixtures::ScopedTempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.File("peer.sock");
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) _exit(3);
    char byte;
    (void)read(fd, &byte, 1);  // until the parent has read our credentials
    _exit(0);
  }
  const int fd = accept(listener, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  absl::StatusOr<PeerIdentity> peer = ReadPeerCredentials(fd);
  close(fd);
  int status = 0;
  waitpid(child, &status, 0);
  close(listener);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->uid, 65534u);
  EXPECT_EQ(peer->gid, 65534u);
  EXPECT_EQ(peer->pid, child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ResumeTokenTest, StoredHellosNeverCarryTheToken) {
  v1::SessionHello hello = fixtures::Hello("j", 0, "s");
  hello.set_resume_token("secret");
  v1::SessionHello stored;
  ASSERT_TRUE(stored.ParseFromString(SerializeHelloForStorage(hello)));
  EXPECT_EQ(stored.resume_token(), "");
  EXPECT_EQ(stored.session_id(), "s");
}

TEST(ResumeTokenTest, RandomHexDigestedAndComparedWhole) {
  absl::StatusOr<std::string> a = NewResumeToken();
  absl::StatusOr<std::string> b = NewResumeToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(ResumeTokenDigest(*a).size(), 32u);
  EXPECT_TRUE(SameDigest(ResumeTokenDigest(*a), ResumeTokenDigest(*a)));
  EXPECT_FALSE(SameDigest(ResumeTokenDigest(*a), ResumeTokenDigest(*b)));
  EXPECT_FALSE(SameDigest(ResumeTokenDigest(*a), ResumeTokenDigest(*a).substr(0, 31)));
}

class AccessControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir_.File("catalog.sqlite"));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    access_ = std::make_unique<AccessControl>(&peers_, catalog_.get(), Rules());
  }

  fixtures::ScopedTempDir dir_;
  PeerRegistry peers_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<AccessControl> access_;
};

// Reliability campaign row 4j: a job id was one namespace for every user, first writer owns, and
// the rightful owner's records were refused for ever. Now the id stays its first owner's and any
// other writer's run is kept apart, under an id only that writer may use.
TEST_F(AccessControlTest, AnotherUsersRunOfAJobIdIsKeptApartNeverRefused) {
  ASSERT_EQ(*access_->ClaimForWrite(Peer(kMallory), "4242"), "4242");
  const std::string alice_tag = OwnerTagOfUid(kAlice);
  absl::StatusOr<std::string> alice = access_->ClaimForWrite(Peer(kAlice), "4242");
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(*alice, "4242@" + alice_tag);
  EXPECT_EQ(*catalog_->JobOwner("4242", 0), kMallory);
  EXPECT_EQ(*catalog_->JobOwner(*alice, 0), kAlice);
  // Her next process goes to the same place; mallory cannot take alice's apart id first.
  EXPECT_EQ(*access_->ClaimForWrite(Peer(kAlice), "4242"), *alice);
  const absl::Status squat = access_->ClaimForWrite(Peer(kMallory), "9@" + alice_tag).status();
  EXPECT_TRUE(absl::IsPermissionDenied(squat)) << squat;
  EXPECT_THAT(squat.message(), HasSubstr("holds the runs of user " + alice_tag));
  EXPECT_TRUE(access_->ClaimForWrite(Peer(kAlice), "9@" + alice_tag).ok());
  // Root and admins read and profile every job, but their runs are theirs, kept apart too.
  for (Access access : {Access::kRead, Access::kProfile}) {
    EXPECT_TRUE(absl::IsPermissionDenied(access_->CheckJobAccess(Peer(kMallory), *alice, access)));
    EXPECT_TRUE(access_->CheckJobAccess(Peer(kAlice), *alice, access).ok());
    EXPECT_TRUE(access_->CheckJobAccess(Peer(0), *alice, access).ok());
    EXPECT_TRUE(access_->CheckJobAccess(Peer(kMallory, 1, {kAdmins}), *alice, access).ok());
  }
  EXPECT_EQ(*access_->ClaimForWrite(Peer(0), "4242"), "4242@" + OwnerTagOfUid(0));
  // An unknown job is the handler's NOT_FOUND, not a refusal.
  EXPECT_TRUE(access_->CheckJobAccess(Peer(kMallory), "nobody-job", Access::kRead).ok());
}

TEST_F(AccessControlTest, BothOwnersAreToldOfTheClash) {
  ASSERT_TRUE(access_->ClaimForWrite(Peer(kMallory), "4242").ok());
  const std::string apart = *access_->ClaimForWrite(Peer(kAlice), "4242");
  for (const char* job : {"4242", apart.c_str()}) {
    ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello(job, 0, "s"), 1).ok());
  }
  std::vector<v1::JobInfo> jobs = *catalog_->ListJobs();
  ASSERT_TRUE(access_->FilterReadable(Peer(kMallory), &jobs).ok());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_THAT(jobs[0].kept_apart(), ::testing::ElementsAre(apart));
}

TEST_F(AccessControlTest, NewJobsPerMinuteAreBoundedPerUser) {
  PeerLimits limits(PeerLimitOptions{/*max_streams=*/10, /*max_streams_per_uid=*/5,
                                     /*max_new_jobs_per_minute=*/3});
  AccessControl access(&peers_, catalog_.get(), Rules(), &limits);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(access.ClaimForWrite(Peer(kMallory), absl::StrCat("m", i)).ok());
  const absl::Status fourth = access.ClaimForWrite(Peer(kMallory), "m3").status();
  EXPECT_TRUE(absl::IsResourceExhausted(fourth)) << fourth;
  EXPECT_THAT(fourth.message(), HasSubstr("--max-new-jobs-per-minute"));
  // Jobs it has are still written; other users are not held back by it.
  EXPECT_TRUE(access.ClaimForWrite(Peer(kMallory), "m0").ok());
  EXPECT_TRUE(access.ClaimForWrite(Peer(kAlice), "a0").ok());
}

TEST(PeerLimitsTest, StreamsAreBoundedPerUidAndInAll) {
  PeerLimits limits(PeerLimitOptions{/*max_streams=*/4, /*max_streams_per_uid=*/2, 0});
  std::vector<std::unique_ptr<PeerLimits::Slot>> held;
  for (int i = 0; i < 2; ++i) held.push_back(*limits.AdmitStream(Peer(kMallory)));
  const absl::Status third = limits.AdmitStream(Peer(kMallory)).status();
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_THAT(third.message(), HasSubstr("--max-streams-per-uid"));
  held.push_back(*limits.AdmitStream(Peer(kAlice)));
  PeerIdentity forwarded = Peer(kMallory);
  forwarded.forwarded_by = "node certificate CN=n1";
  held.push_back(*limits.AdmitStream(forwarded));  // a node's streams count in the total only
  EXPECT_THAT(limits.AdmitStream(Peer(kAlice)).status().message(), HasSubstr("--max-streams"));
  held.erase(held.begin());  // a stream ends: its place is free again
  EXPECT_TRUE(limits.AdmitStream(Peer(kMallory)).ok());
  EXPECT_EQ(limits.streams(), 3);
}

TEST(PeerLimitsTest, QueriesInFlightAreBoundedPerUidButNotForRoot) {
  PeerLimitOptions options;
  options.max_queries_per_uid = 2;
  PeerLimits limits(options);
  std::vector<std::unique_ptr<PeerLimits::Slot>> held;
  for (int i = 0; i < 2; ++i) held.push_back(*limits.AdmitQuery(Peer(kMallory)));
  const absl::Status third = limits.AdmitQuery(Peer(kMallory)).status();
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_THAT(third.message(), HasSubstr("--max-queries-per-uid"));
  EXPECT_TRUE(limits.AdmitQuery(Peer(kAlice)).ok()) << "another user is not held back";
  for (int i = 0; i < 5; ++i) held.push_back(*limits.AdmitQuery(Peer(0)));
  EXPECT_EQ(limits.streams(), 0) << "queries are not streams";
  held.erase(held.begin());  // a query answered: its place is free again
  EXPECT_TRUE(limits.AdmitQuery(Peer(kMallory)).ok());
}

TEST_F(AccessControlTest, JobsListedBeforeOwnersBelongToTheDaemonsUser) {
  // A job the catalog held before version 3 (no owner row).
  ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello("old-job", 0, "s"), 1).ok());
  EXPECT_EQ(*catalog_->JobOwner("old-job", /*legacy_owner=*/0), 0u);
  EXPECT_EQ(*access_->ClaimForWrite(Peer(kAlice), "old-job"), "old-job@" + OwnerTagOfUid(kAlice));
  EXPECT_EQ(*catalog_->JobOwner("old-job", 0), 0u);
}

TEST_F(AccessControlTest, ListingsKeepOnlyReadableJobs) {
  ASSERT_TRUE(access_->ClaimForWrite(Peer(kAlice), "a").ok());
  ASSERT_TRUE(access_->ClaimForWrite(Peer(kMallory), "m").ok());
  for (const char* job : {"a", "m"}) {
    ASSERT_TRUE(catalog_->SessionConnected(fixtures::Hello(job, 0, "s"), 1).ok());
  }
  auto listed = [&](const PeerIdentity& peer) {
    std::vector<v1::JobInfo> jobs = *catalog_->ListJobs();
    EXPECT_TRUE(access_->FilterReadable(peer, &jobs).ok());
    std::vector<std::string> ids;
    for (const v1::JobInfo& job : jobs) ids.push_back(job.job_id());
    return ids;
  };
  EXPECT_THAT(listed(Peer(kAlice)), ::testing::ElementsAre("a"));
  EXPECT_THAT(listed(Peer(kMallory)), ::testing::ElementsAre("m"));
  EXPECT_THAT(listed(Peer(0)), ::testing::ElementsAre("a", "m"));
  EXPECT_THAT(listed(Peer(77, kAdmins)), ::testing::ElementsAre("a", "m"));
  EXPECT_THAT(listed(Peer(77)), ::testing::IsEmpty());
}

TEST_F(AccessControlTest, ASessionResumesOnlyWithItsToken) {
  const v1::SessionHello hello = fixtures::Hello("j", 0, "session-1");
  absl::StatusOr<std::string> first = access_->CheckResumeToken(hello, "secret-of-session-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "");  // the hello brought its own: nothing to send back
  EXPECT_TRUE(access_->CheckResumeToken(hello, "secret-of-session-1").ok());
  const absl::Status forged = access_->CheckResumeToken(hello, "secret-of-session-2").status();
  EXPECT_TRUE(absl::IsPermissionDenied(forged)) << forged;
  EXPECT_THAT(forged.message(), HasSubstr("session-1"));
  EXPECT_THAT(forged.message(), ::testing::Not(HasSubstr("secret")));
  EXPECT_TRUE(absl::IsPermissionDenied(access_->CheckResumeToken(hello, "").status()));
  // A hello without a token gets one drawn, which resumes it afterwards.
  const v1::SessionHello other = fixtures::Hello("j", 0, "session-2");
  absl::StatusOr<std::string> drawn = access_->CheckResumeToken(other, "");
  ASSERT_TRUE(drawn.ok());
  EXPECT_EQ(drawn->size(), 64u);
  EXPECT_TRUE(access_->CheckResumeToken(other, *drawn).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(access_->CheckResumeToken(other, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      access_->CheckResumeToken(fixtures::Hello("j", 0, "s3"), std::string(300, 'x')).status()));
}

// The whole path: a unix-socket caller is identified (root here, so allowed), a plain-TCP one
// has no identity and reaches no job.
class DaemonAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonOptions options = fixtures::TestDaemonOptions(dir_);
    options.tcp_address = "127.0.0.1:0";
    options.insecure_loopback_tcp = true;
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // Opens a session of `job` over `target` and commits one batch; the stream's final status.
  grpc::Status Produce(const std::string& target, const std::string& job, const std::string& token,
                       v1::Welcome* welcome) {
    auto stub =
        v1::Collector::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    auto stream = stub->Stream(&context);
    v1::UpMessage up;
    *up.mutable_hello() = fixtures::Hello(job, 0, "session-" + job);
    up.mutable_hello()->set_resume_token(token);
    v1::DownMessage down;
    if (stream->Write(up) && stream->Read(&down) && down.has_welcome()) {
      *welcome = down.welcome();
      up.Clear();
      up.mutable_batch()->set_seq(1);
      stream->Write(up);
      stream->Read(&down);  // the ack
    }
    stream->WritesDone();
    while (stream->Read(&down)) {
    }
    return stream->Finish();
  }

  std::vector<std::string> ListedJobs(const std::string& target) {
    auto stub = v1::Query::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::ListJobsResponse response;
    EXPECT_TRUE(stub->ListJobs(&context, {}, &response).ok());
    std::vector<std::string> ids;
    for (const v1::JobInfo& job : response.jobs()) ids.push_back(job.job_id());
    return ids;
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<DaemonServer> server_;
};

TEST_F(DaemonAccessTest, UnixCallersAreIdentifiedAndTcpCallersReachNoJob) {
  struct stat info;
  ASSERT_EQ(stat(dir_.File("fs.sock").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0666u);  // every user reaches it; each call is authorised
  v1::Welcome welcome;
  grpc::Status produced = Produce(server_->target(), "j1", "token-1", &welcome);
  ASSERT_TRUE(produced.ok()) << produced.error_message();
  EXPECT_EQ(welcome.resume_token(), "");  // we brought ours
  EXPECT_THAT(ListedJobs(server_->target()), ::testing::ElementsAre("j1"));
  // The token is kept as a digest only: no file of the data dir holds it.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_.File("data"))) {
    if (!entry.is_regular_file()) continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), {});
    EXPECT_EQ(bytes.find("token-1"), std::string::npos) << entry.path();
  }

  EXPECT_THAT(ListedJobs(server_->tcp_target()), ::testing::IsEmpty());
  auto tcp = v1::Query::NewStub(
      grpc::CreateChannel(server_->tcp_target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ReportRequest request;
  request.set_job_id("j1");
  v1::Report report;
  const grpc::Status denied = tcp->GetReport(&context, request, &report);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("plain TCP carries no identity"));
  v1::Welcome none;
  EXPECT_EQ(Produce(server_->tcp_target(), "j2", "t", &none).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(DaemonAccessTest, AReconnectNeedsTheSessionsToken) {
  v1::Welcome welcome;
  ASSERT_TRUE(Produce(server_->target(), "j", "", &welcome).ok());
  ASSERT_EQ(welcome.resume_token().size(), 64u);  // drawn for a hello without one
  EXPECT_EQ(Produce(server_->target(), "j", "", &welcome).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Produce(server_->target(), "j", "forged", &welcome).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::Welcome resumed;
  const std::string token = welcome.resume_token();
  ASSERT_TRUE(Produce(server_->target(), "j", token, &resumed).ok());
  EXPECT_EQ(resumed.committed_seq(), 1u);
  EXPECT_EQ(resumed.resume_token(), "");
}

}  // namespace
}  // namespace flopscope::daemon
