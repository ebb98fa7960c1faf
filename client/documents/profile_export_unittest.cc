#include "client/documents/profile_export.h"

#include "absl/strings/str_split.h"
#include "client/documents/report_json.h"
#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::Report;

Report TwoModuleReport() {
  Report report;
  report.set_job_id("csv");
  report.add_ranks()->set_world_size(1);
  auto add = [&](const std::string& path, uint32_t depth, uint64_t params, double flops,
                 int64_t ns) {
    auto* module = report.add_modules();
    module->set_path(path);
    module->set_name(path.substr(path.rfind('/') + 1));
    module->set_depth(depth);
    module->set_cpu_time_ns(ns);
    module->set_params(params);
    module->set_flops(flops);
  };
  add("Net", 0, 400, 8e9, 4'000'000);
  add("Net/odd, \"name\"", 1, 100, 2e9, 1'000'000);
  auto* batch = report.add_metadata();
  batch->set_key("batch_size");
  batch->set_value("16");
  return report;
}

TEST(ProfileExportTest, JsonKeepsTheReportAndAddsTheProfile) {
  const Report report = TwoModuleReport();
  const Profile profile = BuildProfile(report, {});
  const std::string json =
      RenderReportJson(report, [&](JsonWriter& writer) { WriteProfileJson(profile, writer); });
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json;
  EXPECT_EQ(flat->at("job"), "\"csv\"");
  EXPECT_EQ(flat->at("modules[0].path"), "\"Net\"");
  EXPECT_EQ(flat->at("profile.batch_size"), "16");
  EXPECT_EQ(flat->at("profile.summary.params_per_gpu.value"), "400");
  EXPECT_EQ(flat->at("profile.summary.fwd_flops_per_gpu.value"), "8000000000.0");
  EXPECT_EQ(flat->at("profile.summary.fwd_latency_s.value"), "0.004");
  EXPECT_EQ(flat->at("profile.summary.fwd_flops_per_s.value"), "2000000000000.0");
  EXPECT_EQ(flat->at("profile.summary.bwd_latency_s.value"), "null");
  EXPECT_EQ(flat->at("profile.summary.mfu.value"), "null");
  EXPECT_EQ(flat->at("profile.modules#"), "2");
  // No step window and no phases: module latencies are whole-run totals, and say so.
  EXPECT_EQ(flat->at("profile.step_window.requested"), "false");
  EXPECT_EQ(flat->at("profile.step_window.counted#"), "0");
  EXPECT_EQ(flat->at("profile.modules[0].latency_min_s"), "null");
  EXPECT_EQ(flat->at("profile.latency_basis"),
            "\"no step or phase marked: module latencies are their totals over the run\"");
  EXPECT_EQ(flat->at("profile.modules[1].macs"), "1000000000.0");
  EXPECT_EQ(flat->at("profile.modules[1].flops_per_s"), "2000000000000.0");
  EXPECT_EQ(flat->at("profile.modules[1].path"), "\"Net/odd, \\\"name\\\"\"");
}

TEST(ProfileExportTest, CsvHasOneRowPerModuleWithShares) {
  const std::string csv = RenderProfileCsv(BuildProfile(TwoModuleReport(), {}));
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[0],
            "path,class,depth,params,params_pct,macs,macs_pct,latency_s,latency_pct,flops,"
            "flops_per_s,latency_min_s,latency_max_s,counted_steps,counted_kernels");
  // No step window: no min and max per step.
  // Numbers as people read them: the shortest text that reads back as the same value.
  EXPECT_EQ(lines[1],
            "Net,Net,0,400,100,4000000000,100,0.004,100,8000000000,"
            "2000000000000,,,0,0");
  // The quoted path and class hold a comma; the rest splits plainly.
  const std::string quoted = "\"Net/odd, \"\"name\"\"\",\"odd, \"\"name\"\"\",";
  ASSERT_EQ(lines[2].substr(0, quoted.size()), quoted);
  std::vector<std::string> rest = absl::StrSplit(lines[2].substr(quoted.size()), ',');
  ASSERT_EQ(rest.size(), 13u);
  EXPECT_EQ(rest[1], "100");  // params
  EXPECT_EQ(rest[2], "25");   // % params
  EXPECT_EQ(rest[4], "25");   // % MACs
  EXPECT_EQ(rest[6], "25");   // % latency
}

}  // namespace
}  // namespace flopscope::client
