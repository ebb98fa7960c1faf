// `flopscope bogus` and `flopscope reprot`: the unknown command named, the nearest suggested
// only when it is close and alone.

#include "client/commands/command_names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

const std::vector<std::string> kCommands = {"run",    "jobs",  "report",  "import",
                                            "ranks",  "diff",  "profile", "counters",
                                            "export", "prune", "help"};

TEST(CommandNamesTest, ACloseMisspellingIsSuggested) {
  EXPECT_EQ(NearestCommand("reprot", kCommands), "report");
  EXPECT_EQ(NearestCommand("jbos", kCommands), "jobs");
  EXPECT_EQ(NearestCommand("countres", kCommands), "counters");
  EXPECT_EQ(NearestCommand("Report", kCommands), "report");
  EXPECT_EQ(NearestCommand("profiel", kCommands), "profile");
}

TEST(CommandNamesTest, NothingCloseSuggestsNothing) {
  EXPECT_EQ(NearestCommand("bogus", kCommands), "");
  EXPECT_EQ(NearestCommand("x", kCommands), "");
  EXPECT_EQ(NearestCommand("deploy", kCommands), "");
}

TEST(CommandNamesTest, TheMessageNamesTheWordTheSuggestionAndTheList) {
  const std::string bogus = UnknownCommandMessage("bogus", kCommands);
  EXPECT_EQ(bogus.rfind("unknown command 'bogus'\ncommands: run, jobs, report,", 0), 0u) << bogus;
  EXPECT_EQ(bogus.find("did you mean"), std::string::npos) << bogus;
  const std::string typo = UnknownCommandMessage("reprot", kCommands);
  EXPECT_EQ(typo.rfind("unknown command 'reprot'; did you mean 'report'?\n", 0), 0u) << typo;
}

}  // namespace
}  // namespace flopscope::client
