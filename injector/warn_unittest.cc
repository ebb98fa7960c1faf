#include "injector/warn.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace flopscope::injector {
namespace {

// Runs Warn(text) with stderr redirected into a pipe (dup2) and returns what it wrote.
std::string WarnOutput(std::string_view text) {
  int fds[2];
  if (pipe(fds) != 0) return "<pipe failed>";
  const int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  Warn(text);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  std::string out;
  char chunk[512];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof chunk)) > 0) out.append(chunk, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST(WarnTest, OneLineWithPrefix) {
  EXPECT_EQ(WarnOutput("no CUDA driver"), "flopscope: no CUDA driver\n");
}

TEST(WarnTest, EmptyTextIsStillOneLine) { EXPECT_EQ(WarnOutput(""), "flopscope: \n"); }

TEST(WarnTest, ControlCharactersCannotForgeLinesOrMoveTheCursor) {
  const std::string out = WarnOutput("a\nflopscope: forged\r\x1b[2J\tb\x7f");
  EXPECT_EQ(out, "flopscope: a?flopscope: forged??[2J?b?\n");
  EXPECT_EQ(out.find('\n'), out.size() - 1);
}

TEST(WarnTest, Utf8PassesUnchanged) {
  EXPECT_EQ(WarnOutput("range \xc3\xa9t\xc3\xa9 \xe2\x9c\x93"),
            "flopscope: range \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n");
}

TEST(WarnTest, LongTextIsCutAndMarked) {
  const std::string text(5000, 'x');
  const std::string out = WarnOutput(text);
  const std::string prefix = "flopscope: ";
  ASSERT_GT(out.size(), prefix.size() + 4);
  EXPECT_EQ(out.substr(0, prefix.size()), prefix);
  EXPECT_EQ(out.substr(out.size() - 4), "...\n");
  const std::string body = out.substr(prefix.size(), out.size() - prefix.size() - 4);
  EXPECT_LT(body.size(), text.size());
  EXPECT_EQ(body, std::string(body.size(), 'x'));
  // Cut once: one line however long the text.
  EXPECT_EQ(out.find('\n'), out.size() - 1);
}

}  // namespace
}  // namespace flopscope::injector
