#include "client/commands/embedded_run.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using ::testing::HasSubstr;

TEST(LaunchedPerRankTest, ASizeAboveOneFromAnyLauncher) {
  EXPECT_FALSE(LaunchedPerRank(Environment()));
  EXPECT_FALSE(LaunchedPerRank(Environment::FromEntries({"WORLD_SIZE=1", "SLURM_PROCID=0"})));
  EXPECT_FALSE(LaunchedPerRank(Environment::FromEntries({"SLURM_NTASKS=one"})));
  EXPECT_TRUE(LaunchedPerRank(Environment::FromEntries({"WORLD_SIZE=8"})));
  EXPECT_TRUE(LaunchedPerRank(Environment::FromEntries({"SLURM_NTASKS=2"})));
  EXPECT_TRUE(LaunchedPerRank(Environment::FromEntries({"OMPI_COMM_WORLD_SIZE=4"})));
  EXPECT_TRUE(LaunchedPerRank(Environment::FromEntries({"PMI_SIZE=16"})));
}

TEST(NoModuleRangeMessageTest, NamesTheJobTheCausesAndTheFix) {
  const std::string without = NoModuleRangeMessage("j", false, {"python", "train.py"});
  EXPECT_THAT(without, HasSubstr("job j recorded no module range"));
  EXPECT_THAT(without, HasSubstr("no --torch? the program never imported torch? no NVTX ranges?"));
  EXPECT_THAT(without, HasSubstr("try: flopscope run --torch -- python train.py"));

  const std::string with = NoModuleRangeMessage("j", true, {"python", "train.py"});
  EXPECT_THAT(with, HasSubstr("job j recorded no module range"));
  EXPECT_THAT(with, HasSubstr("never imported torch"));
  EXPECT_THAT(with, ::testing::Not(HasSubstr("run --torch --")));
}

}  // namespace
}  // namespace flopscope::client
