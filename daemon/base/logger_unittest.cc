// Log lines: one per call, whatever text a client put into the message.

#include "daemon/base/logger.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

// Everything the logger writes to stderr while `log` runs.
template <typename Fn>
std::string CaptureStderr(Fn log) {
  fixtures::ScopedTempDir dir;
  const std::string path = dir.File("stderr");
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int saved = dup(STDERR_FILENO);
  dup2(file, STDERR_FILENO);
  log();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LoggerTest, ClientTextCannotForgeALineOrSendEscapes) {
  const std::string host = "node7\nflopscoped: FORGED LOG LINE\r\x1b[2J";
  const std::string out = CaptureStderr([&] { LogInfo("connected job a (host ", host, ")"); });
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_THAT(out, ::testing::StartsWith("flopscoped: connected job a (host node7"));
  EXPECT_THAT(out, ::testing::HasSubstr("FORGED LOG LINE"));  // kept, visibly, on the one line
}

TEST(LoggerTest, IllFormedBytesAreReplacedNotEchoed) {
  const std::string job("j\xff\x00x", 4);
  const std::string out = CaptureStderr([&] { LogWarning("job ", job); });
  EXPECT_EQ(out.find('\xff'), std::string::npos);
  EXPECT_EQ(out.find('\0'), std::string::npos);
  EXPECT_EQ(out, "flopscoped: warning: job j\xEF\xBF\xBD\xEF\xBF\xBDx\n");
}

}  // namespace
}  // namespace flopscope::daemon
