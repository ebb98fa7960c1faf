#include "client/model/profile_flops.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/documents/profile_export.h"
#include "client/documents/report_json.h"
#include "client/model/group_profiles.h"
#include "client/testing/json_parse_for_test.h"
#include "client/text/profile_text.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::Report;

constexpr char kBf16[] = "tensor:bf16_dst_fp32";

void AddPrecision(ModuleStats* module, const std::string& precision, double flops) {
  flopscope::v1::PrecisionFlops* entry = module->add_flops_by_precision();
  entry->set_precision(precision);
  entry->set_flops(flops);
}

void AddWindow(Report& report, int32_t rank, int64_t first, int64_t last, uint64_t unmatched,
               const std::string& status = "") {
  flopscope::v1::RankCounterWindow* entry = report.add_counter_windows();
  entry->set_rank(rank);
  entry->mutable_window()->set_first_step(first);
  entry->mutable_window()->set_last_step(last);
  entry->mutable_window()->set_metric_set("full");
  entry->mutable_window()->set_passes(3);
  entry->mutable_window()->set_ranges_unmatched(unmatched);
  entry->mutable_window()->set_status(status);
}

PhaseStats* AddPhase(Report& report, const std::string& name, uint64_t calls, int64_t median_ns) {
  PhaseStats* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(calls);
  phase->set_cpu_time_ns(median_ns * static_cast<int64_t>(calls));
  phase->set_median_ns(median_ns);
  return phase;
}

// Two H100 ranks, each with 2 uncounted steps and counter windows; the daemon's figures are
// FLOPs per counted step summed over both ranks:
//   model            8000 = tensor bf16 6000 + fp32 2000, GPU time 8 ms over 2 x 2 steps
//   model/layer      6000 = tensor bf16 6000
//   <unattributed>    400 = fp32 400
//   forward 3000 (tensor 2400 + fp32 600), median 1 ms; backward 5000, median 2 ms.
Report CountedReport() {
  Report report;
  report.set_job_id("counted");
  for (int32_t rank : {0, 1}) {
    flopscope::v1::RankInfo* info = report.add_ranks();
    info->set_rank(rank);
    info->set_world_size(2);
    info->add_devices()->set_name("NVIDIA H100 80GB HBM3");
  }
  ModuleStats* model = report.add_modules();
  model->set_path("model");
  model->set_name("model");
  model->set_gpu_time_ns(8'000'000);
  model->set_kernels(40);
  model->set_flops(8000);
  AddPrecision(model, kBf16, 6000);
  AddPrecision(model, "fp32", 2000);
  model->set_counted_steps(3);
  model->set_counted_kernels(30);
  ModuleStats* layer = report.add_modules();
  layer->set_path("model/layer");
  layer->set_name("layer");
  layer->set_depth(1);
  layer->set_gpu_time_ns(6'000'000);
  layer->set_flops(6000);
  AddPrecision(layer, kBf16, 6000);
  ModuleStats* idle = report.add_modules();  // counted, but never ran in an uncounted step
  idle->set_path("model/idle");
  idle->set_name("idle");
  idle->set_depth(1);
  idle->set_flops(0);
  ModuleStats* loose = report.add_modules();
  loose->set_path("<unattributed>");
  loose->set_name("<unattributed>");
  loose->set_gpu_time_ns(400'000);
  loose->set_flops(400);
  AddPrecision(loose, "fp32", 400);
  AddPhase(report, "step", 4, 4'000'000);
  PhaseStats* forward = AddPhase(report, "forward", 4, 1'000'000);
  forward->set_flops(3000);
  PhaseStats* backward = AddPhase(report, "backward", 4, 2'000'000);
  backward->set_flops(5000);
  AddWindow(report, 0, 3, 4, 0);
  AddWindow(report, 1, 3, 4, 2);
  report.set_fp16_convention("ncu-packed-half: fp16 = 2*hadd + 2*hmul + 4*hfma");
  return report;
}

const ModuleRow& Row(const Profile& profile, const std::string& path) {
  for (const ModuleRow& row : profile.modules) {
    if (row.path == path) return row;
  }
  ADD_FAILURE() << "no row " << path;
  static const ModuleRow kNone;
  return kNone;
}

TEST(ProfileFlopsTest, PeakPrecisionFollowsTheInputType) {
  EXPECT_EQ(PeakPrecisionOf("fp64"), Precision::kFp64);
  EXPECT_EQ(PeakPrecisionOf("fp32"), Precision::kFp32);
  EXPECT_EQ(PeakPrecisionOf("fp16"), Precision::kFp16);
  EXPECT_EQ(PeakPrecisionOf("tensor:bf16_dst_fp32"), Precision::kBf16);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp16_dst_fp16"), Precision::kFp16);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp16"), Precision::kFp16);
  EXPECT_EQ(PeakPrecisionOf("tensor:tf32_dst_fp32"), Precision::kTf32);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp64"), Precision::kFp64);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp8"), Precision::kFp8);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp4_fp6_fp8"), Precision::kFp8);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp4"), std::nullopt);
  EXPECT_EQ(PeakPrecisionOf("tensor:fp4_fp6"), std::nullopt);
  EXPECT_EQ(PeakPrecisionOf(""), std::nullopt);
}

TEST(ProfileFlopsTest, CountedRanksAreThoseWithAWindowThatDidNotFail) {
  Report report = CountedReport();
  EXPECT_EQ(CountedRanks(report), 2);
  report.mutable_counter_windows(1)->mutable_window()->set_status("hardware busy (DCGM?)");
  EXPECT_EQ(CountedRanks(report), 1);
  report.clear_counter_windows();  // an import: counters without windows
  EXPECT_EQ(CountedRanks(report), 2);
  EXPECT_EQ(CountedRanks(Report()), 1);
}

TEST(ProfileFlopsTest, CountedStepsLineGroupsAlikeWindows) {
  Report report = CountedReport();
  AddWindow(report, 2, 3, 4, 1);
  AddWindow(report, 3, 9, 9, 0, "hardware busy (DCGM?)");
  AddWindow(report, 5, -1, -1, 0);
  EXPECT_EQ(CountedStepsLine(CountedWindowsOf(report)),
            "a window without step marks on rank 5 (set full, 3 passes, 0 unmatched); "
            "steps 3-4 on ranks 0-2 (set full, 3 passes, 3 unmatched); "
            "step 9 on rank 3 failed: hardware busy (DCGM?)");
  EXPECT_EQ(CountedStepsLine({}), "");
}

TEST(ProfileFlopsTest, ModuleFlopsArePerGpuWithTheirPrecisionsAndAchievedRate) {
  const Profile profile = BuildProfile(CountedReport(), {});
  EXPECT_EQ(profile.counted_ranks, 2);
  const ModuleRow& model = Row(profile, "model");
  ASSERT_TRUE(model.flops.has_value());
  EXPECT_DOUBLE_EQ(*model.flops, 4000);
  EXPECT_DOUBLE_EQ(*model.macs, 2000);
  ASSERT_EQ(model.flops_by_precision.size(), 2u);
  EXPECT_EQ(model.flops_by_precision[0].precision, kBf16);
  EXPECT_DOUBLE_EQ(model.flops_by_precision[0].flops, 3000);
  EXPECT_DOUBLE_EQ(model.flops_by_precision[1].flops, 1000);
  EXPECT_EQ(model.counted_steps, 3u);
  EXPECT_EQ(model.counted_kernels, 30u);
  // 8 ms over 2 ranks x 2 steps: 2 ms per step; 4000 FLOPs / 2 ms.
  EXPECT_DOUBLE_EQ(model.latency_s, 0.002);
  ASSERT_TRUE(model.flops_per_s.value.has_value());
  EXPECT_DOUBLE_EQ(*model.flops_per_s.value, 2e6);
  const ModuleRow& idle = Row(profile, "model/idle");
  EXPECT_FALSE(idle.flops_per_s.value.has_value());
  EXPECT_EQ(idle.flops_per_s.note, "no latency: it ran in counted steps only");
  // The job: the top-level modules and <unattributed>, per GPU, the dominant precision first.
  ASSERT_EQ(profile.flops_by_precision.size(), 2u);
  EXPECT_EQ(profile.flops_by_precision[0].precision, kBf16);
  EXPECT_DOUBLE_EQ(profile.flops_by_precision[0].flops, 3000);
  EXPECT_EQ(profile.flops_by_precision[1].precision, "fp32");
  EXPECT_DOUBLE_EQ(profile.flops_by_precision[1].flops, 1200);
}

TEST(ProfileFlopsTest, SummaryFlopsAreMeasuredFromTheCountedPhases) {
  const Profile profile = BuildProfile(CountedReport(), {});
  EXPECT_DOUBLE_EQ(*profile.fwd_flops_per_gpu.value, 1500);
  EXPECT_EQ(profile.fwd_flops_per_gpu.note, kMeasuredForward);
  EXPECT_DOUBLE_EQ(*profile.fwd_macs_per_gpu.value, 750);
  EXPECT_DOUBLE_EQ(*profile.bwd_flops_per_gpu.value, 2500);
  EXPECT_EQ(profile.bwd_flops_per_gpu.note, kMeasuredBackward);
  EXPECT_DOUBLE_EQ(*profile.fwd_flops_per_s.value, 1.5e6);
  EXPECT_DOUBLE_EQ(*profile.bwd_flops_per_s.value, 1.25e6);
  EXPECT_EQ(profile.bwd_flops_per_s.note, kMeasuredBackward);
  EXPECT_DOUBLE_EQ(*profile.fwd_bwd_flops_per_s.value, 4000 / 0.003);
  // MFU against the H100's dense bf16 peak: bf16 tensor work dominates.
  EXPECT_EQ(profile.precision, "bf16");
  ASSERT_TRUE(profile.mfu.value.has_value()) << profile.mfu.note;
  EXPECT_DOUBLE_EQ(*profile.mfu.value, 4000 / 0.003 / 989.4e12);
  EXPECT_EQ(profile.mfu.note,
            "against 989.4 TFLOPS bf16, the dominant counted precision (tensor:bf16_dst_fp32)");
  // --precision still wins.
  const Profile fp32 =
      BuildProfile(CountedReport(), {.peak_tflops = std::nullopt, .precision = Precision::kFp32});
  EXPECT_EQ(fp32.precision, "fp32");
}

TEST(ProfileFlopsTest, WithoutACountedBackwardPhaseBwdIsTheEstimate) {
  Report report = CountedReport();
  report.mutable_phases(2)->clear_flops();
  const Profile profile = BuildProfile(report, {});
  EXPECT_DOUBLE_EQ(*profile.bwd_flops_per_gpu.value, 3000);
  EXPECT_EQ(profile.bwd_flops_per_gpu.note, kBwdEstimate);
  EXPECT_EQ(profile.bwd_flops_per_s.note, kBwdEstimate);
  EXPECT_EQ(profile.fwd_bwd_flops_per_s.note,
            "estimated: bwd flops = 2 x fwd flops (fwd flops measured)");
  // Without a counted forward phase either, fwd is the top-level modules' FLOPs.
  report.mutable_phases(1)->clear_flops();
  const Profile modules = BuildProfile(report, {});
  EXPECT_DOUBLE_EQ(*modules.fwd_flops_per_gpu.value, 4000);
  EXPECT_EQ(modules.fwd_flops_per_gpu.note, "measured");  // counted, though not by phase
}

TEST(ProfileFlopsTest, SummaryTextLabelsMeasuredFiguresAndListsPrecisions) {
  const Profile profile = BuildProfile(CountedReport(), {});
  const std::string text = RenderSummary(profile) + RenderAdditions(profile);
  auto line = [](const std::string& label, const std::string& value) {
    return label + std::string(72 - label.size(), ' ') + value + "\n";
  };
  for (const std::string& expected : {
           line("fwd flops per GPU: ", "1.5 K  (measured: counted forward phase)"),
           line("bwd flops per GPU: ", "2.5 K  (measured: counted backward phase)"),
           line("bwd FLOPS per GPU = bwd flops per GPU / bwd latency: ",
                "1.25 MFLOPS  (measured: counted backward phase)"),
           line("fwd+bwd FLOPS per GPU = (fwd + bwd flops) / (fwd+bwd latency): ",
                "1.33 MFLOPS  (measured)"),
           line("counted steps: ", "steps 3-4 on ranks 0-1 (set full, 3 passes, 2 unmatched)"),
           line("fp16 convention: ", "ncu-packed-half: fp16 = 2*hadd + 2*hmul + 4*hfma"),
       }) {
    EXPECT_TRUE(absl::StrContains(text, expected)) << expected << "\n" << text;
  }
  EXPECT_TRUE(absl::StrContains(text,
                                "Counted flops by precision, per GPU and step (from 2 "
                                "ranks; the dominant precision first):\n"))
      << text;
  std::vector<std::string> rows;
  for (absl::string_view row : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(row, "  precision") || absl::StartsWith(row, "  tensor:") ||
        absl::StartsWith(row, "  fp32")) {
      rows.emplace_back(row);
    }
  }
  ASSERT_EQ(rows.size(), 3u) << text;
  std::vector<std::string> header = absl::StrSplit(rows[0], ' ', absl::SkipEmpty());
  EXPECT_EQ(header,
            (std::vector<std::string>{"precision", "job", "share", "model", "<unattributed>"}));
  std::vector<std::string> bf16 = absl::StrSplit(rows[1], "  ", absl::SkipEmpty());
  for (std::string& cell : bf16) cell = std::string(absl::StripAsciiWhitespace(cell));
  EXPECT_EQ(bf16, (std::vector<std::string>{kBf16, "3 K", "71.43%", "3 K", "-"}));
}

TEST(ProfileFlopsTest, DetailedLinesGiveTheRateOrWhyNot) {
  const Profile profile = BuildProfile(CountedReport(), {});
  const std::string text = RenderDetailed(profile, {});
  EXPECT_TRUE(absl::StrContains(text, "2 KMACs = 100% MACs, 2 ms = 100% latency, 2 MFLOPS\n"))
      << text;
  // DeepSpeed prints 0 where there is no rate; the additions say why.
  EXPECT_TRUE(absl::StrContains(text, "0 s = 0% latency, 0 FLOPS)")) << text;
  EXPECT_TRUE(
      absl::StrContains(RenderAdditions(profile), "-  (no latency: it ran in counted steps only)"))
      << RenderAdditions(profile);
}

TEST(ProfileFlopsTest, MeasuredFlopsFarFromTheAnnouncedOnesAreFlagged) {
  Report report = CountedReport();
  auto announce = [&](const std::string& key, const std::string& value) {
    flopscope::v1::Metadata* entry = report.add_metadata();
    entry->set_key(key);
    entry->set_value(value);
  };
  announce("flops model", "4200");        // measured 4000 per GPU and step: within 10 %
  announce("flops model/layer", "2000");  // measured 3000: 50 % more than announced
  const Profile profile = BuildProfile(report, {});
  const ModuleRow& model = Row(profile, "model");
  EXPECT_DOUBLE_EQ(*model.flops, 4000);  // the measured figure stays the figure
  EXPECT_FALSE(model.flops_announced);
  ASSERT_TRUE(model.announced_flops.has_value());
  EXPECT_DOUBLE_EQ(*model.announced_flops, 4200);
  EXPECT_FALSE(model.flops_disagree);
  const ModuleRow& layer = Row(profile, "model/layer");
  EXPECT_DOUBLE_EQ(*layer.flops, 3000);
  EXPECT_TRUE(layer.flops_disagree);
  EXPECT_FALSE(Row(profile, "model/idle").announced_flops.has_value());

  const std::string text = RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(text, "measured flops differ from the announced 2 K by +50%"))
      << text;
  const std::string json =
      RenderReportJson(report, [&](JsonWriter& writer) { WriteProfileJson(profile, writer); });
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json;
  EXPECT_EQ(flat->at("profile.modules[1].announced_flops"), "2000");
  EXPECT_EQ(flat->at("profile.modules[1].flops_disagree"), "true");
  EXPECT_EQ(flat->at("profile.modules[0].flops_disagree"), "false");
}

TEST(ProfileFlopsTest, JsonCarriesTheCountedFiguresAndParsesBack) {
  const Report report = CountedReport();
  const Profile profile = BuildProfile(report, {});
  const std::string json =
      RenderReportJson(report, [&](JsonWriter& writer) { WriteProfileJson(profile, writer); });
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json;
  EXPECT_EQ(flat->at("profile.counted_ranks"), "2");
  EXPECT_EQ(flat->at("profile.flops_by_precision[0].precision"), "\"tensor:bf16_dst_fp32\"");
  EXPECT_EQ(flat->at("profile.flops_by_precision[1].flops"), "1200");
  EXPECT_EQ(flat->at("profile.counter_windows#"), "2");
  EXPECT_EQ(flat->at("profile.counter_windows[1].ranges_unmatched"), "2");
  EXPECT_EQ(flat->at("profile.fp16_convention"), flat->at("fp16_convention"));
  EXPECT_EQ(flat->at("profile.summary.bwd_flops_per_gpu.value"), "2500");
  EXPECT_EQ(flat->at("profile.summary.bwd_flops_per_gpu.note"),
            "\"measured: counted backward phase\"");
  EXPECT_EQ(flat->at("profile.modules[0].flops"), "4000");
  EXPECT_EQ(flat->at("profile.modules[0].flops_per_s"), "2000000.0");
  EXPECT_EQ(flat->at("profile.modules[0].flops_by_precision[0].flops"), "3000");
  EXPECT_EQ(flat->at("profile.modules[0].counted_steps"), "3");
  EXPECT_EQ(flat->at("profile.modules[0].counted_kernels"), "30");
  EXPECT_EQ(flat->at("profile.modules[2].flops_per_s"), "null");
  EXPECT_EQ(flat->at("profile.modules[2].flops_per_s_note"),
            "\"no latency: it ran in counted steps only\"");
}

TEST(ProfileFlopsTest, CsvHasAColumnPerCountedPrecision) {
  const std::string csv = RenderProfileCsv(BuildProfile(CountedReport(), {}));
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << csv;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  ASSERT_EQ(header.size(), 22u) << lines[0];
  EXPECT_EQ(header[13], "counted_steps");
  EXPECT_EQ(header[19], "figures_from_children");
  EXPECT_EQ(header[20], "flops:tensor:bf16_dst_fp32");
  EXPECT_EQ(header[21], "flops:fp32");
  const std::vector<std::string> model = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(model.size(), 22u) << lines[1];
  EXPECT_EQ(model[0], "model");
  EXPECT_EQ(model[9], "4000");
  EXPECT_EQ(model[10], "2000000");
  EXPECT_EQ(model[13], "3");
  EXPECT_EQ(model[14], "30");
  EXPECT_EQ(model[17], "true");  // ran
  EXPECT_EQ(model[20], "3000");
  EXPECT_EQ(model[21], "1000");
  const std::vector<std::string> layer = absl::StrSplit(lines[2], ',');
  EXPECT_EQ(layer[20], "3000");
  EXPECT_EQ(layer[21], "") << "no fp32 in layer";
}

TEST(ProfileFlopsTest, AModelReplicaAddsItsRanksCountedFlops) {
  // Each rank alone (one rank per report): the replica sums modules, means the job per GPU.
  std::vector<Profile> ranks;
  for (double scale : {1.0, 3.0}) {
    Report report = CountedReport();
    report.mutable_ranks()->RemoveLast();
    report.mutable_counter_windows()->RemoveLast();
    ModuleStats* model = report.mutable_modules(0);
    model->set_flops(model->flops() * scale);
    for (auto& entry : *model->mutable_flops_by_precision()) entry.set_flops(entry.flops() * scale);
    report.mutable_phases(2)->set_flops(5000 * scale);
    ranks.push_back(BuildProfile(report, {}));
  }
  const Profile replica = CombineModelReplica(ranks, {}, "model replica 0");
  const ModuleRow& model = Row(replica, "model");
  EXPECT_DOUBLE_EQ(*model.flops, 8000 + 24000);
  EXPECT_DOUBLE_EQ(model.flops_by_precision[0].flops, 6000 + 18000);
  EXPECT_EQ(model.counted_steps, 6u);
  EXPECT_EQ(replica.bwd_flops_per_gpu.note, kMeasuredBackward);
  EXPECT_DOUBLE_EQ(*replica.bwd_flops_per_gpu.value, (5000 + 15000) / 2.0);
  EXPECT_DOUBLE_EQ(replica.flops_by_precision[0].flops, (6000 + 18000) / 2.0);
  EXPECT_EQ(replica.counter_windows.size(), 2u);
}

}  // namespace
}  // namespace flopscope::client
