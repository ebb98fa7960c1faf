#include "client/ranks_view.h"

#include "absl/strings/str_split.h"
#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

flopscope::v1::ListRanksResponse TwoRanks() {
  flopscope::v1::ListRanksResponse ranks;
  auto* first = ranks.add_ranks();
  first->set_rank(0);
  first->set_host("node-a");
  first->set_pid(4242);
  first->set_world_size(4);
  first->set_sessions(1);
  first->set_range_events(900);
  first->set_kernels(0);
  first->set_gpu_status("no CUDA driver: NVTX ranges only");
  first->mutable_layout()->set_tp_size(2);
  first->mutable_layout()->set_dp_size(2);
  first->mutable_layout()->set_tp_rank(0);
  auto* loss = first->add_losses();
  loss->set_cause(flopscope::v1::LOSS_CAUSE_BUFFER_FULL);
  loss->set_records(3);
  first->add_losses()->set_records(4);
  auto* second = ranks.add_ranks();
  second->set_rank(1);
  second->set_host("node-a");
  second->set_connected(true);
  second->set_kernels(17);
  second->add_devices()->set_name("NVIDIA H100 80GB HBM3");
  second->mutable_layout()->set_tp_size(2);
  second->mutable_layout()->set_dp_size(2);
  second->mutable_layout()->set_tp_rank(1);
  return ranks;
}

TEST(RenderRanksTextTest, OneLinePerRankAndWhyThereAreNoKernels) {
  const std::string text = RenderRanksText(TwoRanks());
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;  // header, rule, two ranks, one status line
  EXPECT_NE(lines[2].find("node-a"), std::string::npos);
  EXPECT_NE(lines[2].find("tp 0 pp 0 dp 0"), std::string::npos) << lines[2];
  EXPECT_TRUE(lines[2].ends_with("7")) << lines[2];  // 3 + 4 lost records
  EXPECT_NE(lines[3].find("NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(lines[3].find("yes"), std::string::npos);
  EXPECT_EQ(lines[4], "No GPU records: no CUDA driver: NVTX ranges only");
}

TEST(RenderRanksJsonTest, ListsEveryRank) {
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks()));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks#"), "2");
  EXPECT_EQ(flat->at("ranks[0].rank"), "0");
  EXPECT_EQ(flat->at("ranks[0].lost"), "7");
  EXPECT_EQ(flat->at("ranks[0].world_size"), "4");
  EXPECT_EQ(flat->at("ranks[1].tp_rank"), "1");
  EXPECT_EQ(flat->at("ranks[1].connected"), "true");
  EXPECT_EQ(flat->at("ranks[1].devices[0]"), "\"NVIDIA H100 80GB HBM3\"");
  EXPECT_EQ(flat->at("ranks[1].kernels"), "17");
}

}  // namespace
}  // namespace flopscope::client
