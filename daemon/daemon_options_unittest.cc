#include "daemon/daemon_options.h"

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

TEST(DaemonOptionsTest, UnknownLogLevelIsRefused) {
  DaemonOptions options;
  absl::Status status = Parse({"--log-level", "loud"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("unknown log level 'loud'"));
}

TEST(DaemonOptionsTest, TcpOnlyOnLoopbackAndOnlyWhenAskedFor) {
  DaemonOptions options;
  absl::Status status = Parse({"--tcp", "127.0.0.1:7070"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("needs --insecure-loopback-tcp"));
  EXPECT_THAT(status.message(), HasSubstr("TLS is not implemented yet"));

  options = DaemonOptions();
  status = Parse({"--tcp", "0.0.0.0:7070", "--insecure-loopback-tcp"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("TLS is not implemented yet"));

  options = DaemonOptions();
  status = Parse({"--insecure-loopback-tcp"}, &options);
  EXPECT_THAT(status.message(), HasSubstr("needs --tcp"));

  options = DaemonOptions();
  ASSERT_TRUE(Parse({"--tcp", "localhost:7070", "--insecure-loopback-tcp"}, &options).ok());
  EXPECT_EQ(options.tcp_address, "localhost:7070");
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

}  // namespace
}  // namespace flopscope::daemon
