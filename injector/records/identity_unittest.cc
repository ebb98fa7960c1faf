#include "injector/records/identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

namespace flopscope::injector {
namespace {

class FakeEnvironment {
 public:
  FakeEnvironment(std::initializer_list<std::pair<const std::string, std::string>> vars)
      : vars_(vars) {}
  EnvLookup Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

HostFacts Facts() {
  HostFacts facts;
  facts.host = "node7";
  facts.pid = 4242;
  facts.start_time_ns = 1700000000123456789;
  facts.command = "python train.py";
  return facts;
}

TEST(IdentityTest, DefaultsForAPlainProcess) {
  FakeEnvironment env({});
  const SessionIdentity id = IdentityFromEnvironment(env.Lookup(), Facts());
  EXPECT_EQ(id.job_id, "node7-4242-1700000000");
  EXPECT_EQ(id.session_id, "node7-4242-1700000000123456789");
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.local_rank, 0);
  EXPECT_EQ(id.world_size, 1);
  EXPECT_EQ(id.layout.source, "default");
  EXPECT_EQ(id.layout.dp_size, 1u);
  EXPECT_EQ(id.command, "python train.py");
  EXPECT_TRUE(id.warnings.empty());
}

TEST(IdentityTest, JobIdPrecedenceAndSanitizing) {
  FakeEnvironment all(
      {{"FLOPSCOPE_JOB_ID", "mine"}, {"SLURM_JOB_ID", "77"}, {"TORCHELASTIC_RUN_ID", "te"}});
  EXPECT_EQ(IdentityFromEnvironment(all.Lookup(), Facts()).job_id, "mine");
  FakeEnvironment slurm({{"SLURM_JOB_ID", "77"}, {"TORCHELASTIC_RUN_ID", "te"}});
  EXPECT_EQ(IdentityFromEnvironment(slurm.Lookup(), Facts()).job_id, "77");
  FakeEnvironment elastic({{"TORCHELASTIC_RUN_ID", "../run id"}});
  EXPECT_EQ(IdentityFromEnvironment(elastic.Lookup(), Facts()).job_id, "_._run_id");
}

TEST(IdentityTest, RankFromTheFirstLauncherVariable) {
  FakeEnvironment torch(
      {{"RANK", "5"}, {"OMPI_COMM_WORLD_RANK", "9"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
  SessionIdentity id = IdentityFromEnvironment(torch.Lookup(), Facts());
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.world_size, 8);
  FakeEnvironment slurm({{"SLURM_PROCID", "3"}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(IdentityFromEnvironment(slurm.Lookup(), Facts()).rank, 3);
}

TEST(IdentityTest, MalformedValuesAreReportedAndSkipped) {
  FakeEnvironment env({{"RANK", "two"}, {"PMI_RANK", "2"}, {"WORLD_SIZE", "4"}});
  const SessionIdentity id = IdentityFromEnvironment(env.Lookup(), Facts());
  EXPECT_EQ(id.rank, 2);
  ASSERT_EQ(id.warnings.size(), 1u);
  EXPECT_NE(id.warnings[0].find("RANK='two'"), std::string::npos);
}

TEST(IdentityTest, LayoutCoordinatesTpFastestThenPpThenDp) {
  // world 16 = tp 2 x pp 2 x dp 4; rank 13 = dp 3, pp 0, tp 1.
  FakeEnvironment env({{"RANK", "13"},
                       {"WORLD_SIZE", "16"},
                       {"FLOPSCOPE_TP_SIZE", "2"},
                       {"FLOPSCOPE_PP_SIZE", "2"}});
  const ParallelLayout layout = IdentityFromEnvironment(env.Lookup(), Facts()).layout;
  EXPECT_EQ(layout.source, "env");
  EXPECT_EQ(layout.tp_size, 2u);
  EXPECT_EQ(layout.pp_size, 2u);
  EXPECT_EQ(layout.dp_size, 4u);
  EXPECT_EQ(layout.tp_rank, 1u);
  EXPECT_EQ(layout.pp_rank, 0u);
  EXPECT_EQ(layout.dp_rank, 3u);

  FakeEnvironment rank6({{"RANK", "6"},
                         {"WORLD_SIZE", "16"},
                         {"FLOPSCOPE_TP_SIZE", "2"},
                         {"FLOPSCOPE_PP_SIZE", "2"}});
  const ParallelLayout l6 = IdentityFromEnvironment(rank6.Lookup(), Facts()).layout;
  EXPECT_EQ(l6.tp_rank, 0u);
  EXPECT_EQ(l6.pp_rank, 1u);
  EXPECT_EQ(l6.dp_rank, 1u);
}

TEST(IdentityTest, LayoutThatDoesNotDivideTheWorldIsIgnored) {
  FakeEnvironment env({{"RANK", "1"}, {"WORLD_SIZE", "6"}, {"FLOPSCOPE_TP_SIZE", "4"}});
  const SessionIdentity id = IdentityFromEnvironment(env.Lookup(), Facts());
  EXPECT_EQ(id.layout.source, "default");
  EXPECT_EQ(id.layout.tp_size, 1u);
  EXPECT_EQ(id.layout.dp_size, 6u);
  EXPECT_EQ(id.layout.dp_rank, 1u);
  EXPECT_EQ(id.warnings.size(), 1u);
}

TEST(IdentityTest, RankOutsideTheWorldGrowsTheWorld) {
  FakeEnvironment env({{"RANK", "3"}});
  const SessionIdentity id = IdentityFromEnvironment(env.Lookup(), Facts());
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.warnings.size(), 1u);
}

TEST(IdentityTest, HostFactsDescribeThisProcess) {
  const HostFacts facts = CollectHostFacts();
  EXPECT_FALSE(facts.host.empty());
  EXPECT_EQ(facts.pid, getpid());
  EXPECT_GT(facts.start_time_ns, 1600000000LL * 1000000000);
  EXPECT_NE(facts.command.find("unittest"), std::string::npos);
}

}  // namespace
}  // namespace flopscope::injector
