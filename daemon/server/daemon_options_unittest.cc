#include "daemon/server/daemon_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// Parses a command line the way main() does.
absl::Status Parse(std::vector<std::string> args, DaemonOptions* options) {
  CLI::App app;
  std::string log_level;
  AddDaemonFlags(app, options, &log_level);
  std::vector<const char*> argv = {"flopscoped"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  return ResolveDaemonOptions(log_level, options);
}

TEST(DaemonOptionsTest, DefaultsComeFromTheEnvironment) {
  setenv("FLOPSCOPE_DATA_DIR", "/tmp/fs-data", 1);
  setenv("FLOPSCOPE_SOCKET", "/tmp/fs-test.sock", 1);
  DaemonOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.data_dir, "/tmp/fs-data");
  EXPECT_EQ(options.socket_path, "/tmp/fs-test.sock");
  EXPECT_EQ(options.log_level, LogLevel::kInfo);
  EXPECT_TRUE(options.tcp_address.empty());
  EXPECT_EQ(options.max_receive_message_bytes, 64 << 20);
  unsetenv("FLOPSCOPE_DATA_DIR");
  unsetenv("FLOPSCOPE_SOCKET");
  EXPECT_FALSE(DefaultDataDir().empty());
}

TEST(DaemonOptionsTest, FlagsWin) {
  setenv("FLOPSCOPE_DATA_DIR", "/tmp/ignored", 1);
  DaemonOptions options;
  ASSERT_TRUE(
      Parse({"--data-dir", "/srv/fs", "--socket", "unix:/tmp/x.sock", "--log-level", "debug"},
            &options)
          .ok());
  unsetenv("FLOPSCOPE_DATA_DIR");
  EXPECT_EQ(options.data_dir, "/srv/fs");
  EXPECT_EQ(options.socket_path, "/tmp/x.sock");
  EXPECT_EQ(options.log_level, LogLevel::kDebug);
}

TEST(DaemonOptionsTest, NiceIsAboveTheJobsByDefaultAndBounded) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.nice, kDefaultNice);
  EXPECT_LT(options.nice, 0);  // above a job's default of 0
  DaemonOptions off;
  ASSERT_TRUE(Parse({"--nice", "0"}, &off).ok());
  EXPECT_EQ(off.nice, 0);
  DaemonOptions out_of_range;
  EXPECT_FALSE(Parse({"--nice", "-21"}, &out_of_range).ok());
  EXPECT_FALSE(Parse({"--nice", "20"}, &out_of_range).ok());
}

TEST(DaemonOptionsTest, SpoolCollectionDirectories) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.spool_patterns, (std::vector<std::string>{"/var/tmp/flopscope-spool-*",
                                                              "/run/user/*/flopscope-spool"}));
  DaemonOptions none;
  ASSERT_TRUE(Parse({"--collect-spools"}, &none).ok());
  EXPECT_TRUE(none.spool_patterns.empty());
  DaemonOptions two;
  ASSERT_TRUE(
      Parse({"--collect-spools", "/a/*,/b", "--collect-spools-period-s", "0.5"}, &two).ok());
  EXPECT_EQ(two.spool_patterns, (std::vector<std::string>{"/a/*", "/b"}));
  EXPECT_EQ(two.spool_period_s, 0.5);
}

TEST(DaemonOptionsTest, UnknownLogLevelIsRefused) {
  DaemonOptions options;
  absl::Status status = Parse({"--log-level", "loud"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("unknown log level 'loud'"));
}

TEST(DaemonOptionsTest, TcpOnlyOnLoopbackAndOnlyWhenAskedFor) {
  DaemonOptions options;
  absl::Status status = Parse({"--tcp", "127.0.0.1:7070"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("needs --insecure-loopback-tcp"));
  EXPECT_THAT(status.message(), HasSubstr("give --tls-cert, --tls-key and --tls-ca"));

  options = DaemonOptions();
  status = Parse({"--tcp", "0.0.0.0:7070", "--insecure-loopback-tcp"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("give --tls-cert, --tls-key and --tls-ca"));

  options = DaemonOptions();
  status = Parse({"--insecure-loopback-tcp"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("needs --tcp"));

  options = DaemonOptions();
  ASSERT_TRUE(Parse({"--tcp", "localhost:7070", "--insecure-loopback-tcp"}, &options).ok());
  EXPECT_EQ(options.tcp_address, "localhost:7070");
}

TEST(DaemonOptionsTest, MutualTlsServesAnyAddressAndNeedsTcp) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({"--tcp", "0.0.0.0:7070", "--tls-cert", "c.pem", "--tls-key", "k.pem",
                     "--tls-ca", "ca.pem"},
                    &options)
                  .ok());
  EXPECT_EQ(options.tcp_address, "0.0.0.0:7070");
  EXPECT_EQ(options.tls.ca, "ca.pem");

  options = DaemonOptions();
  EXPECT_THAT(Parse({"--tls-cert", "c.pem"}, &options).message(), HasSubstr("add --tcp"));
  options = DaemonOptions();
  EXPECT_THAT(
      Parse({"--tcp", "127.0.0.1:1", "--insecure-loopback-tcp", "--tls-ca", "ca.pem"}, &options)
          .message(),
      HasSubstr("drop one"));
  options = DaemonOptions();
  EXPECT_THAT(Parse({"--tcp", ":7070", "--tls-ca", "ca.pem"}, &options).message(),
              HasSubstr("expected HOST:PORT"));
}

TEST(DaemonOptionsTest, UpstreamTakesTheTlsFilesWithoutTcpAndBoundsItsOutbox) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({"--upstream", "agg:7070", "--tls-cert", "c.pem", "--tls-key", "k.pem",
                     "--tls-ca", "ca.pem", "--outbox-max-mb", "3"},
                    &options)
                  .ok());
  EXPECT_EQ(options.upstream, "agg:7070");
  EXPECT_TRUE(options.tcp_address.empty());
  EXPECT_EQ(options.outbox_max_bytes, 3 << 20);
  options = DaemonOptions();
  EXPECT_FALSE(Parse({"--upstream", "unix:/a.sock", "--outbox-max-mb", "0"}, &options).ok());
}

TEST(DaemonOptionsTest, MaxDiskIsASizeAndOffByDefault) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.max_disk_bytes, 0u);
  options = DaemonOptions();
  ASSERT_TRUE(Parse({"--max-disk", "20G", "--disk-check-period-s", "5"}, &options).ok());
  EXPECT_EQ(options.max_disk_bytes, uint64_t{20} << 30);
  EXPECT_EQ(options.disk_check_period_s, 5);
  options = DaemonOptions();
  const absl::Status bad = Parse({"--max-disk", "20 gigs"}, &options);
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(std::string(bad.message()), HasSubstr("--max-disk '20 gigs'"));
  options = DaemonOptions();
  EXPECT_FALSE(Parse({"--max-disk", "1G", "--disk-check-period-s", "0"}, &options).ok());
}

TEST(DaemonOptionsTest, UpstreamDrainIsOffUnlessAskedFor) {
  DaemonOptions options;
  ASSERT_TRUE(Parse({"--upstream", "unix:/a.sock"}, &options).ok());
  EXPECT_EQ(options.upstream_drain_s, 0);
  options = DaemonOptions();
  ASSERT_TRUE(Parse({"--upstream", "unix:/a.sock", "--upstream-drain-s", "2.5"}, &options).ok());
  EXPECT_EQ(options.upstream_drain_s, 2.5);
  options = DaemonOptions();
  EXPECT_FALSE(Parse({"--upstream", "unix:/a.sock", "--upstream-drain-s", "-1"}, &options).ok());
}

TEST(DaemonOptionsTest, LoopbackAddressForms) {
  EXPECT_EQ(*LoopbackTcpAddress("127.0.0.1:1", true), "127.0.0.1:1");
  EXPECT_EQ(*LoopbackTcpAddress("[::1]:2", true), "[::1]:2");
  EXPECT_EQ(*LoopbackTcpAddress("::1:3", true), "[::1]:3");
  EXPECT_FALSE(LoopbackTcpAddress("10.0.0.5:7070", true).ok());
  EXPECT_FALSE(LoopbackTcpAddress("127.0.0.1", true).ok());
  EXPECT_FALSE(LoopbackTcpAddress("127.0.0.1:99999", true).ok());
  EXPECT_FALSE(LoopbackTcpAddress("127.0.0.1:port", true).ok());
}

TEST(DaemonOptionsTest, MetricsOnLoopbackUnlessAHostIsGiven) {
  DaemonOptions none;
  ASSERT_TRUE(Parse({}, &none).ok());
  EXPECT_TRUE(none.metrics_address.empty());
  EXPECT_EQ(none.metrics_max_ranks, metrics::kDefaultMaxRanks);
  DaemonOptions port_only;
  ASSERT_TRUE(Parse({"--metrics", "9400", "--metrics-max-ranks", "16"}, &port_only).ok());
  EXPECT_EQ(port_only.metrics_address, "127.0.0.1:9400");
  EXPECT_EQ(port_only.metrics_max_ranks, 16u);
  DaemonOptions everywhere;
  ASSERT_TRUE(Parse({"--metrics", "0.0.0.0:9400"}, &everywhere).ok());
  EXPECT_EQ(everywhere.metrics_address, "0.0.0.0:9400");
  DaemonOptions bad;
  EXPECT_THAT(Parse({"--metrics", "node7:9400"}, &bad).message(), HasSubstr("IPv4"));
  EXPECT_FALSE(Parse({"--metrics", "9400", "--metrics-max-ranks", "0"}, &bad).ok());
}

}  // namespace
}  // namespace flopscope::daemon
