#include "client/model/group_profiles.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::Report;

void AddModule(Report& report, const std::string& path, uint32_t depth, uint64_t params,
               double flops, int64_t cpu_ms) {
  auto* module = report.add_modules();
  module->set_path(path);
  module->set_name(path.substr(path.rfind('/') + 1));
  module->set_depth(depth);
  module->set_calls(1);
  module->set_cpu_time_ns(cpu_ms * 1'000'000);
  module->set_params(params);
  module->set_flops(flops);
}

void AddPhase(Report& report, const std::string& name, int64_t ms) {
  auto* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(1);
  phase->set_cpu_time_ns(ms * 1'000'000);
}

// Rank r of tp 2 x pp 2 x dp 2 (tp fastest): pipeline stage 0 holds GPT/embed, stage 1 GPT/head.
Report RankReport(int r) {
  const uint32_t tp = r % 2, pp = (r / 2) % 2, dp = r / 4;
  Report report;
  report.set_job_id("gpt");
  auto* info = report.add_ranks();
  info->set_rank(r);
  info->set_world_size(8);
  auto* layout = info->mutable_layout();
  layout->set_tp_size(2);
  layout->set_pp_size(2);
  layout->set_dp_size(2);
  layout->set_tp_rank(tp);
  layout->set_pp_rank(pp);
  layout->set_dp_rank(dp);
  AddModule(report, "GPT", 0, pp == 0 ? 100 : 60, pp == 0 ? 1000 : 600, 10 + r);
  if (pp == 0) AddModule(report, "GPT/embed", 1, 40, 300, 4 + r);
  if (pp == 1) AddModule(report, "GPT/head", 1, 20, 200, r == 6 ? 7 : 2);
  AddPhase(report, "forward", 20 + r);
  AddPhase(report, "backward", 40);
  return report;
}

Profile Replica(int dp) {
  std::vector<Profile> ranks;
  for (int r = 4 * dp; r < 4 * dp + 4; ++r) ranks.push_back(BuildProfile(RankReport(r), {}));
  return CombineModelReplica(ranks, {}, "replica");
}

TEST(GroupProfilesTest, ModelReplicaSumsParamsAndFlopsAndTakesTheMaxLatency) {
  const Profile replica = Replica(0);
  EXPECT_EQ(replica.world_size, 8);
  EXPECT_EQ(replica.mp_size, 4);
  EXPECT_EQ(replica.dp_size, 2);
  EXPECT_DOUBLE_EQ(*replica.params_of_model.value, 2 * 100 + 2 * 60);
  EXPECT_DOUBLE_EQ(*replica.params_per_gpu.value, 80);
  EXPECT_TRUE(replica.params_of_model.note.empty()) << "measured, not an estimate";
  EXPECT_DOUBLE_EQ(*replica.fwd_flops_of_model.value, 2 * 1000 + 2 * 600);
  EXPECT_DOUBLE_EQ(*replica.fwd_flops_per_gpu.value, 800);
  EXPECT_DOUBLE_EQ(*replica.fwd_latency_s.value, 0.023);   // rank 3
  EXPECT_DOUBLE_EQ(*replica.iter_latency_s.value, 0.063);  // 23 ms + 40 ms on rank 3
  EXPECT_DOUBLE_EQ(*replica.fwd_flops_per_s.value, 800 / 0.023);

  ASSERT_EQ(replica.modules.size(), 3u);
  EXPECT_EQ(replica.modules[0].path, "GPT");
  EXPECT_DOUBLE_EQ(*replica.modules[0].params, 320);
  EXPECT_DOUBLE_EQ(*replica.modules[0].flops, 3200);
  EXPECT_DOUBLE_EQ(replica.modules[0].latency_s, 0.013);
  EXPECT_EQ(replica.modules[1].path, "GPT/embed");
  EXPECT_DOUBLE_EQ(*replica.modules[1].params, 80);
  EXPECT_DOUBLE_EQ(replica.modules[1].latency_s, 0.005);
  EXPECT_EQ(replica.modules[2].path, "GPT/head");
  EXPECT_DOUBLE_EQ(*replica.modules[2].params, 40);
  EXPECT_DOUBLE_EQ(replica.modules[2].latency_s, 0.002);
}

TEST(GroupProfilesTest, AReplicaStepSpreadIsItsSlowestRanks) {
  std::vector<Profile> ranks;
  const double mins[] = {0.010, 0.012, 0.009, 0.011};
  const double maxes[] = {0.020, 0.018, 0.025, 0.019};
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(BuildProfile(RankReport(r), {}));
    ModuleRow& gpt = ranks.back().modules[0];
    ASSERT_EQ(gpt.path, "GPT");
    gpt.latency_min_s = mins[r];
    gpt.latency_max_s = maxes[r];
  }
  ranks[1].modules[0].latency_min_s.reset();  // rank 1 did not run in the window
  ranks[1].modules[0].latency_max_s.reset();
  const Profile replica = CombineModelReplica(ranks, {}, "replica");
  // Lockstep ranks: the replica's fastest and slowest steps are its slowest rank's.
  ASSERT_TRUE(replica.modules[0].latency_min_s.has_value());
  EXPECT_DOUBLE_EQ(*replica.modules[0].latency_min_s, 0.011);
  EXPECT_DOUBLE_EQ(*replica.modules[0].latency_max_s, 0.025);
}

TEST(GroupProfilesTest, DataParallelSpreadNamesTheSlowestReplicaPerModule) {
  const std::vector<ModuleSpread> rows = DataParallelSpread({Replica(0), Replica(1)});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].path, "<iter>");
  EXPECT_DOUBLE_EQ(rows[0].mean_s, 0.065);  // 63 ms and 67 ms
  EXPECT_EQ(rows[1].path, "GPT");
  EXPECT_EQ(rows[1].replicas, 2);
  EXPECT_DOUBLE_EQ(rows[1].min_s, 0.013);
  EXPECT_DOUBLE_EQ(rows[1].max_s, 0.017);
  EXPECT_DOUBLE_EQ(rows[1].mean_s, 0.015);
  EXPECT_NEAR(rows[1].spread_s, 0.004, 1e-15);
  EXPECT_NEAR(rows[1].spread_pct, 100 * 4.0 / 15, 1e-9);
  EXPECT_EQ(rows[1].slowest, 1);
  EXPECT_EQ(rows[2].path, "GPT/embed");
  EXPECT_DOUBLE_EQ(rows[2].mean_s, 0.007);  // 5 ms and 9 ms
  EXPECT_EQ(rows[3].path, "GPT/head");
  EXPECT_DOUBLE_EQ(rows[3].max_s, 0.007);  // rank 6
  EXPECT_DOUBLE_EQ(rows[3].mean_s, 0.0045);
  EXPECT_NEAR(rows[3].spread_pct, 100 * 5.0 / 4.5, 1e-9);
  EXPECT_EQ(rows[3].slowest, 1);
}

TEST(GroupProfilesTest, ASingleRankReportEstimatesTheModelLikeDeepSpeed) {
  const Profile rank = BuildProfile(RankReport(0), {});
  EXPECT_DOUBLE_EQ(*rank.params_per_gpu.value, 100);
  EXPECT_DOUBLE_EQ(*rank.params_of_model.value, 400);  // x mp_size 4
  EXPECT_NE(rank.params_of_model.note.find("estimate"), std::string::npos);
}

}  // namespace
}  // namespace flopscope::client
