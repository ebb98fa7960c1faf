#include "common/endpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace flopscope {
namespace {

TEST(EndpointTest, ExplicitSocketWins) {
  setenv("FLOPSCOPE_SOCKET", "/tmp/x/fs.sock", 1);
  EXPECT_EQ(DefaultSocketPath(), "/tmp/x/fs.sock");
  unsetenv("FLOPSCOPE_SOCKET");
  EXPECT_FALSE(DefaultSocketPath().empty());
}

SocketPathFacts UserFacts() {
  SocketPathFacts facts;
  facts.runtime_dir = "/run/user/1000";
  facts.runtime_dir_private = true;
  return facts;
}

TEST(EndpointTest, NodeSocketWinsWhenItExistsOrForRoot) {
  SocketPathFacts facts = UserFacts();
  EXPECT_EQ(ChooseSocketPath(facts), "/run/user/1000/flopscope.sock");  // a personal daemon
  facts.node_socket_exists = true;
  EXPECT_EQ(ChooseSocketPath(facts), kNodeSocketPath);
  facts = UserFacts();
  facts.is_root = true;
  EXPECT_EQ(ChooseSocketPath(facts), kNodeSocketPath);
  facts.explicit_socket = "/srv/fs.sock";
  EXPECT_EQ(ChooseSocketPath(facts), "/srv/fs.sock");
}

// Campaign 7e: a fallback another user could create (the temp dir) let them capture a job's
// data. A runtime dir that is not private, or none, gives the node path, never /tmp.
TEST(EndpointTest, NeverFallsBackToAPathAnotherUserCanCreate) {
  SocketPathFacts facts = UserFacts();
  facts.runtime_dir_private = false;
  EXPECT_EQ(ChooseSocketPath(facts), kNodeSocketPath);
  facts.runtime_dir.clear();
  EXPECT_EQ(ChooseSocketPath(facts), kNodeSocketPath);
  setenv("TMPDIR", "/tmp", 1);
  unsetenv("FLOPSCOPE_SOCKET");
  EXPECT_EQ(DefaultSocketPath().rfind("/tmp", 0), std::string::npos);
}

TEST(EndpointTest, GrpcTargetAddsUnixScheme) {
  EXPECT_EQ(GrpcTarget("/run/flopscope/flopscope.sock"), "unix:/run/flopscope/flopscope.sock");
  EXPECT_EQ(GrpcTarget("unix:/a.sock"), "unix:/a.sock");
  EXPECT_EQ(GrpcTarget("ipv4:127.0.0.1:7070"), "ipv4:127.0.0.1:7070");
  EXPECT_EQ(GrpcTarget("localhost:7070"), "localhost:7070");
}

TEST(EndpointTest, GrpcTargetMakesARelativeSocketPathAbsolute) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  // A bare name has no colon, so it is a socket in the working directory, never a DNS name.
  EXPECT_EQ(GrpcTarget("fs.sock"), std::string("unix:") + cwd + "/fs.sock");
  EXPECT_EQ(GrpcTarget("run/fs.sock"), std::string("unix:") + cwd + "/run/fs.sock");
  EXPECT_EQ(GrpcTarget("./fs.sock"), std::string("unix:") + cwd + "/./fs.sock");
}

}  // namespace
}  // namespace flopscope
