#include "common/endpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace flopscope {
namespace {

TEST(EndpointTest, ExplicitSocketWins) {
  setenv("FLOPSCOPE_SOCKET", "/tmp/x/fs.sock", 1);
  EXPECT_EQ(DefaultSocketPath(), "/tmp/x/fs.sock");
  unsetenv("FLOPSCOPE_SOCKET");
  EXPECT_FALSE(DefaultSocketPath().empty());
}

TEST(EndpointTest, GrpcTargetAddsUnixScheme) {
  EXPECT_EQ(GrpcTarget("/run/flopscope/flopscope.sock"), "unix:/run/flopscope/flopscope.sock");
  EXPECT_EQ(GrpcTarget("unix:/a.sock"), "unix:/a.sock");
  EXPECT_EQ(GrpcTarget("ipv4:127.0.0.1:7070"), "ipv4:127.0.0.1:7070");
  EXPECT_EQ(GrpcTarget("localhost:7070"), "localhost:7070");
}

}  // namespace
}  // namespace flopscope
