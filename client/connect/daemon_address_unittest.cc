// Which daemon a query command asks, and which TLS files it uses (daemon_address.h).
#include "client/connect/daemon_address.h"

#include "common/endpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using ::testing::HasSubstr;

Environment Env(std::vector<std::string> entries) { return Environment::FromEntries(entries); }

TEST(DaemonAddressTest, SocketByDefault) {
  absl::StatusOr<DaemonAddress> address = ResolveDaemonAddress({}, Env({}));
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->socket, DefaultSocketPath());
  EXPECT_FALSE(address->tls.has_value());

  address = ResolveDaemonAddress({"/tmp/x.sock", "", {}}, Env({"FLOPSCOPE_SERVER=agg:7070"}));
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->socket, "/tmp/x.sock");  // --socket beats FLOPSCOPE_SERVER
}

TEST(DaemonAddressTest, ServerNeverOverPlainTcp) {
  absl::Status status = ResolveDaemonAddress({"", "agg:7070", {}}, Env({})).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("only over mutual TLS"));
  EXPECT_THAT(status.message(), HasSubstr("--tls-cert, --tls-key and --tls-ca"));

  // From the environment too.
  status = ResolveDaemonAddress({}, Env({"FLOPSCOPE_SERVER=agg:7070"})).status();
  EXPECT_THAT(status.message(), HasSubstr("--server agg:7070 is reached only over mutual TLS"));
}

TEST(DaemonAddressTest, TlsFilesFromFlagsElseVariables) {
  // The files do not exist: the error names the one read first and where its path came from.
  absl::Status status = ResolveDaemonAddress({"", "agg:7070", {"", "", ""}},
                                             Env({"FLOPSCOPE_TLS_CERT=/nonexistent/c.pem",
                                                  "FLOPSCOPE_TLS_KEY=/nonexistent/k.pem",
                                                  "FLOPSCOPE_TLS_CA=/nonexistent/ca.pem"}))
                            .status();
  EXPECT_THAT(status.message(), HasSubstr("--tls-cert /nonexistent/c.pem: cannot read it"));

  status = ResolveDaemonAddress(
               {"", "agg:7070", {"/nonexistent/mine.pem", "", ""}},
               Env({"FLOPSCOPE_TLS_CERT=/nonexistent/c.pem", "FLOPSCOPE_TLS_KEY=/nonexistent/k.pem",
                    "FLOPSCOPE_TLS_CA=/nonexistent/ca.pem"}))
               .status();
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/mine.pem"));

  status =
      ResolveDaemonAddress({"", "agg:7070", {"/nonexistent/mine.pem", "", ""}}, Env({})).status();
  EXPECT_THAT(status.message(), HasSubstr("--tls-key is missing"));
}

TEST(DaemonAddressTest, RefusesContradictionsAndBadForms) {
  EXPECT_THAT(ResolveDaemonAddress({"/tmp/x.sock", "agg:7070", {}}, Env({})).status().message(),
              HasSubstr("not both"));
  EXPECT_THAT(ResolveDaemonAddress({"", "", {"", "", "/tmp/ca.pem"}}, Env({})).status().message(),
              HasSubstr("a unix socket needs none"));
  for (const char* bad : {"agg", "agg:", ":7070", "agg:0", "agg:70000", "agg:http"}) {
    EXPECT_THAT(ResolveDaemonAddress({"", bad, {}}, Env({})).status().message(),
                HasSubstr("expected HOST:PORT"))
        << bad;
  }
}

}  // namespace
}  // namespace flopscope::client
