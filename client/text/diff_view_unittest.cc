#include "client/text/diff_view.h"

#include "absl/strings/match.h"
#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

Profile Job(const std::string& id, std::vector<std::tuple<std::string, double, double>> rows) {
  Profile profile;
  profile.job_id = id;
  for (const auto& [path, latency, flops] : rows) {
    ModuleRow row;
    row.path = path;
    row.latency_s = latency;
    row.flops = flops;
    profile.modules.push_back(row);
  }
  return profile;
}

TEST(DiffViewTest, SortsModulesByTheirLatencyChange) {
  // A fused attention: attn 4 ms -> 1 ms, mlp unchanged, a new fused kernel module.
  const Profile a =
      Job("before", {{"Net", 0.010, 8e9}, {"Net/attn", 0.004, 2e9}, {"Net/mlp", 0.005, 6e9}});
  const Profile b = Job("after", {{"Net", 0.0075, 8e9},
                                  {"Net/attn", 0.001, 2e9},
                                  {"Net/mlp", 0.005, 6e9},
                                  {"Net/fused", 0.0005, 0}});
  const std::vector<ModuleDiff> rows = DiffProfiles(a, b);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].path, "Net/attn");
  EXPECT_DOUBLE_EQ(rows[0].impact_s, 0.003);
  EXPECT_EQ(rows[1].path, "Net");
  EXPECT_EQ(rows[2].path, "Net/fused");
  EXPECT_FALSE(rows[2].latency_a.has_value());
  EXPECT_EQ(rows[3].path, "Net/mlp");
  EXPECT_DOUBLE_EQ(rows[3].impact_s, 0);

  const std::string text = RenderDiff(a, b, rows, "text");
  EXPECT_TRUE(absl::StrContains(text, "-3 ms (-75%)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "500 GFLOPS")) << text;  // 2e9 / 4 ms
  EXPECT_TRUE(absl::StrContains(text, "2 TFLOPS")) << text;    // 2e9 / 1 ms
  EXPECT_TRUE(absl::StrContains(text, "new")) << text;

  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderDiff(a, b, rows, "json"));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("modules#"), "4");
  EXPECT_EQ(flat->at("modules[0].path"), "\"Net/attn\"");
  EXPECT_EQ(flat->at("modules[0].flops_per_s_b"), "2000000000000.0");
  EXPECT_EQ(flat->at("modules[2].latency_s_a"), "null");
}

}  // namespace
}  // namespace flopscope::client
