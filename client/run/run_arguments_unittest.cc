#include "client/run/run_arguments.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using Args = std::vector<std::string>;

RunArguments Split(const Args& args) { return SplitRunArguments(args, 1, {"--job", "--socket"}); }

TEST(SplitRunArgumentsTest, CommandStartsAtTheFirstNonOption) {
  const RunArguments split = Split({"flopscope", "run", "--job", "j", "python", "-u", "t.py"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run", "--job", "j"}));
  EXPECT_EQ(split.command, (Args{"python", "-u", "t.py"}));
}

TEST(SplitRunArgumentsTest, OptionsAfterTheCommandBelongToTheCommand) {
  const RunArguments split = Split({"flopscope", "run", "train", "--job", "x", "--", "y"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run"}));
  EXPECT_EQ(split.command, (Args{"train", "--job", "x", "--", "y"}));
}

TEST(SplitRunArgumentsTest, DoubleDashEndsOptionsAndIsDropped) {
  const RunArguments split = Split({"flopscope", "run", "--socket=/s", "--", "--weird", "-c"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run", "--socket=/s"}));
  EXPECT_EQ(split.command, (Args{"--weird", "-c"}));
}

TEST(SplitRunArgumentsTest, AValueThatLooksLikeACommandStaysWithItsOption) {
  const RunArguments split = Split({"flopscope", "run", "--socket", "sock", "sh", "-c", "exit 7"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run", "--socket", "sock"}));
  EXPECT_EQ(split.command, (Args{"sh", "-c", "exit 7"}));
}

TEST(SplitRunArgumentsTest, FlagsTakeNoValue) {
  const RunArguments split = Split({"flopscope", "run", "--torch", "python", "train.py"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run", "--torch"}));
  EXPECT_EQ(split.command, (Args{"python", "train.py"}));
}

TEST(SplitRunArgumentsTest, NoCommandLeavesItEmpty) {
  EXPECT_TRUE(Split({"flopscope", "run", "--job", "j"}).command.empty());
  EXPECT_TRUE(Split({"flopscope", "run", "--"}).command.empty());
  EXPECT_TRUE(Split({"flopscope", "run", "--job"}).command.empty());
}

TEST(SplitRunArgumentsTest, UnknownOptionsGoToTheParserToBeRejected) {
  const RunArguments split = Split({"flopscope", "run", "--jbo", "x", "cmd"});
  EXPECT_EQ(split.flopscope_args, (Args{"flopscope", "run", "--jbo"}));
  EXPECT_EQ(split.command, (Args{"x", "cmd"}));
}

}  // namespace
}  // namespace flopscope::client
