#include "client/model/profile_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/documents/profile_export.h"
#include "client/documents/report_json.h"
#include "client/testing/sample_report.h"
#include "client/text/deepspeed_format.h"
#include "client/text/profile_text.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::Report;

using testing::Announce;

// One LeNet5 module as the store holds it: counted FLOPs, announced params, MACs and class.
void AddLeNetModule(Report& report, const std::string& path, const std::string& class_name,
                    uint32_t depth, uint64_t params, double flops, int64_t macs, int64_t cpu_ns) {
  ModuleStats* module = report.add_modules();
  module->set_path(path);
  module->set_name(path.substr(path.rfind('/') + 1));
  module->set_depth(depth);
  module->set_calls(1);
  module->set_cpu_time_ns(cpu_ns);
  module->set_params(params);
  module->set_flops(flops);
  Announce(&report, "class " + path, class_name);
  Announce(&report, "macs " + path, absl::StrCat(macs));
}

// REFERENCE_VALUES.md section 2: LeNet5(10) on a (1024, 1, 32, 32) input.
Report LeNet5Report() {
  Report report;
  report.set_job_id("lenet");
  report.add_ranks()->set_world_size(1);
  const std::string fe = "LeNet5/feature_extractor";
  const std::string cl = "LeNet5/classifier";
  AddLeNetModule(report, "LeNet5", "LeNet5", 0, 61706, 866076672, 426516480, 1'000'000);
  AddLeNetModule(report, fe, "Sequential", 1, 50692, 843702272, 415334400, 800'000);
  AddLeNetModule(report, fe + "/0", "Conv2d", 2, 156, 245661696, 120422400, 300'000);
  AddLeNetModule(report, fe + "/1", "Tanh", 2, 0, 0, 0, 10'000);
  AddLeNetModule(report, fe + "/2", "AvgPool2d", 2, 0, 4816896, 0, 20'000);
  AddLeNetModule(report, fe + "/3", "Conv2d", 2, 2416, 493158400, 245760000, 300'000);
  AddLeNetModule(report, fe + "/4", "Tanh", 2, 0, 0, 0, 10'000);
  AddLeNetModule(report, fe + "/5", "AvgPool2d", 2, 0, 1638400, 0, 20'000);
  AddLeNetModule(report, fe + "/6", "Conv2d", 2, 48120, 98426880, 49152000, 100'000);
  AddLeNetModule(report, fe + "/7", "Tanh", 2, 0, 0, 0, 10'000);
  AddLeNetModule(report, cl, "Sequential", 1, 11014, 22364160, 11182080, 150'000);
  AddLeNetModule(report, cl + "/0", "Linear", 2, 10164, 20643840, 10321920, 80'000);
  AddLeNetModule(report, cl + "/1", "Tanh", 2, 0, 0, 0, 10'000);
  AddLeNetModule(report, cl + "/2", "Linear", 2, 850, 1720320, 860160, 40'000);
  return report;
}

TEST(ProfileModelTest, LeNet5TotalsMatchDeepSpeedsTest) {
  const Profile profile = BuildProfile(LeNet5Report(), {});
  EXPECT_DOUBLE_EQ(*profile.params_per_gpu.value, 61706);
  EXPECT_DOUBLE_EQ(*profile.fwd_flops_per_gpu.value, 866076672);
  EXPECT_DOUBLE_EQ(*profile.fwd_macs_per_gpu.value, 426516480);
  const std::string text = RenderSummary(profile);
  EXPECT_TRUE(absl::StrContains(text, "61.71 K")) << text;
  EXPECT_TRUE(absl::StrContains(text, "426.52 MMACs")) << text;
  EXPECT_TRUE(absl::StrContains(text, "866.08 M")) << text;
}

TEST(ProfileModelTest, LeNet5DetailedProfileHasTheReferencePercentages) {
  const std::string text = RenderDetailed(BuildProfile(LeNet5Report(), {}), {});
  for (const char* expected :
       {"(0): Conv2d(156 = 0.25% Params, 120.42 MMACs = 28.23% MACs,",
        "(3): Conv2d(2.42 K = 3.92% Params, 245.76 MMACs = 57.62% MACs,",
        "(6): Conv2d(48.12 K = 77.98% Params, 49.15 MMACs = 11.52% MACs,",
        "(0): Linear(10.16 K = 16.47% Params, 10.32 MMACs = 2.42% MACs,",
        "(2): Linear(850 = 1.38% Params, 860.16 KMACs = 0.2% MACs,",
        "LeNet5(\n  61.71 K = 100% Params, 426.52 MMACs = 100% MACs, 1 ms = 100% latency, "
        "866.08 GFLOPS\n"}) {
    EXPECT_TRUE(absl::StrContains(text, expected)) << expected << "\n" << text;
  }
  EXPECT_TRUE(absl::StrContains(text, "  (feature_extractor): Sequential(\n")) << text;
  EXPECT_TRUE(absl::EndsWith(text, "  )\n)\n")) << text;
}

TEST(ProfileModelTest, LeNet5AggregatedProfileIsDeepSpeeds) {
  const std::string text = RenderAggregated(BuildProfile(LeNet5Report(), {}), {});
  EXPECT_TRUE(absl::StrContains(text,
                                "depth 0:\n"
                                "    params      - {'LeNet5': '61.71 K'}\n"
                                "    MACs        - {'LeNet5': '426.52 MMACs'}\n"
                                "    fwd latency - {'LeNet5': '1 ms'}\n"
                                "depth 1:\n"
                                "    params      - {'Sequential': '61.71 K'}\n"
                                "    MACs        - {'Sequential': '426.52 MMACs'}\n"
                                "    fwd latency - {'Sequential': '950 us'}\n"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "depth 2:")) << "DeepSpeed leaves the deepest level out";
  // DeepSpeed's module_depth=N prints depths 0 .. N-1.
  const std::string top2 =
      RenderAggregated(BuildProfile(LeNet5Report(), {}), {.depth = 3, .top = 2});
  EXPECT_TRUE(absl::StrContains(
      top2, "depth 2:\n    params      - {'Conv2d': '50.69 K', 'Linear': '11.01 K'}\n"))
      << top2;
  const std::string two = RenderAggregated(BuildProfile(LeNet5Report(), {}), {.depth = 2});
  EXPECT_TRUE(absl::StrContains(two, "depth 1:")) << two;
  EXPECT_FALSE(absl::StrContains(two, "depth 2:")) << two;
}

// README's BERT-Large example on one A100, batch 80: unrounded timers that DeepSpeed printed as
// 76.67 ms / 108.02 ms / 34.09 us, and 6279.86 G fwd flops.
Report BertLargeReport() {
  Report report;
  report.set_job_id("bert");
  auto* rank = report.add_ranks();
  rank->set_world_size(1);
  rank->add_devices()->set_name("NVIDIA A100-SXM4-40GB");
  ModuleStats* top = report.add_modules();
  top->set_path("BertForPreTrainingPreLN");
  top->set_name("BertForPreTrainingPreLN");
  top->set_calls(1);
  top->set_cpu_time_ns(76'390'000);
  top->set_params(336'226'108);
  top->set_flops(6279.86e9);
  auto phase = [&](const std::string& name, int64_t ns) {
    auto* stats = report.add_phases();
    stats->set_name(name);
    stats->set_calls(1);
    stats->set_cpu_time_ns(ns);
    stats->set_min_ns(ns);
    stats->set_max_ns(ns);
    stats->set_median_ns(ns);
  };
  phase("forward", 76'674'000);
  phase("backward", 108'020'000);
  phase("optimizer", 34'090);
  Announce(&report, "batch_size", "80");
  Announce(&report, "precision", "fp16");
  return report;
}

TEST(ProfileModelTest, BertLargeSummaryArithmeticMatchesTheReadme) {
  const Profile profile = BuildProfile(BertLargeReport(), {});
  const std::string text = RenderSummary(profile);
  auto line = [](const std::string& label, const std::string& value) {
    return absl::StrCat(label, std::string(72 - label.size(), ' '), value);
  };
  // DeepSpeed's "{:<8}" pads a short value to 8 columns; flopscope ends the line with the value.
  auto padded = [](const std::string& value) { return value + "\n"; };
  for (const std::string& expected :
       {line("params per GPU: ", "336.23 M"), line("fwd MACs per GPU: ", "3.14 TMACs"),
        line("fwd flops per GPU: ", "6.28 T"), line("fwd latency: ", "76.67 ms"),
        line("bwd latency: ", "108.02 ms"),
        line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ", "81.9 TFLOPS"),
        line("bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency: ",
             "116.27 TFLOPS  (estimate"),
        line("fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency): ",
             "102 TFLOPS  (estimate"),
        line("step latency: ", "34.09 us"), line("iter latency: ", "184.73 ms"),
        line("samples/second: ", padded("433.07")), line("batch size per GPU: ", padded("80")),
        line("FLOPS per GPU = 3 * fwd flops per GPU / iter latency: ", "101.99 TFLOPS")}) {
    EXPECT_TRUE(absl::StrContains(text, expected)) << expected << "\n" << text;
  }
  // 102.00 TFLOPS against the A100's 312 TFLOPS fp16 peak.
  ASSERT_TRUE(profile.mfu.value.has_value()) << profile.mfu.note;
  EXPECT_NEAR(*profile.mfu.value, 102.0046e12 / 312e12, 1e-5);
  const std::string additions = RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(additions, "32.69%  (against 312 TFLOPS fp16")) << additions;
  EXPECT_FALSE(absl::StrContains(text, "MFU")) << "additions stay out of DeepSpeed's layout";
}

// DeepSpeed: samples_per_iter = train_micro_batch_size_per_gpu() * world_size, whatever the
// model-parallel layout (profiler.py, print_model_profile).
TEST(ProfileModelTest, SamplesPerSecondMultipliesByTheWorldSizeAsDeepSpeedDoes) {
  Report report = BertLargeReport();
  const int world_size = 8;
  auto* layout = report.mutable_ranks(0)->mutable_layout();
  layout->set_tp_size(2);
  layout->set_pp_size(2);
  layout->set_dp_size(2);
  report.mutable_ranks(0)->set_world_size(world_size);
  const Profile profile = BuildProfile(report, {});
  ASSERT_EQ(profile.dp_size, 2);
  ASSERT_TRUE(profile.samples_per_s.value.has_value()) << profile.samples_per_s.note;
  ASSERT_TRUE(profile.iter_latency_s.value.has_value());
  ASSERT_TRUE(profile.batch_size.has_value());
  EXPECT_DOUBLE_EQ(*profile.samples_per_s.value, static_cast<double>(*profile.batch_size) *
                                                     world_size / *profile.iter_latency_s.value);
}

TEST(ProfileModelTest, UnknownFiguresAreMarkedWithTheReasonNotZero) {
  Report report = BertLargeReport();
  report.mutable_modules(0)->clear_flops();
  report.mutable_ranks(0)->mutable_devices(0)->set_name("Mystery GPU");
  report.clear_metadata();
  const Profile profile = BuildProfile(report, {});
  EXPECT_FALSE(profile.fwd_flops_per_s.value.has_value());
  EXPECT_FALSE(profile.samples_per_s.value.has_value());
  const std::string text = RenderSummary(profile);
  // No rank said why: the text says that too.
  EXPECT_TRUE(absl::StrContains(text, "-  (no FLOPs: no GPU records; the ranks did not say why)"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "-  (batch size not announced")) << text;

  Report known_flops = BertLargeReport();
  known_flops.mutable_ranks(0)->mutable_devices(0)->set_name("Mystery GPU");
  const Profile no_peak = BuildProfile(known_flops, {});
  EXPECT_TRUE(absl::StrContains(no_peak.mfu.note, "Mystery GPU")) << no_peak.mfu.note;
  const Profile overridden =
      BuildProfile(known_flops, {.peak_tflops = 204.0, .precision = std::nullopt});
  ASSERT_TRUE(overridden.mfu.value.has_value());
  EXPECT_NEAR(*overridden.mfu.value, 0.5, 1e-4);
}

TEST(ProfileModelTest, SummaryLatenciesAreMediansOfTheUncountedSteps) {
  Report report = BertLargeReport();
  // Three uncounted forwards of 70, 76.67 and 90 ms (mean 78.89 ms); steps 3 and 4 counted.
  flopscope::v1::PhaseStats* forward = report.mutable_phases(0);
  forward->set_calls(3);
  forward->set_cpu_time_ns(70'000'000 + 76'670'000 + 90'000'000);
  forward->set_median_ns(76'670'000);
  for (int i = 1; i < report.phases_size(); ++i) report.mutable_phases(i)->set_calls(3);
  report.mutable_steps()->set_last_step(5);
  report.mutable_steps()->set_uncounted_steps(3);
  report.mutable_steps()->add_counted_steps(3);
  report.mutable_steps()->add_counted_steps(4);
  const Profile profile = BuildProfile(report, {});
  ASSERT_TRUE(profile.fwd_latency_s.value.has_value());
  EXPECT_DOUBLE_EQ(*profile.fwd_latency_s.value, 0.07667);
  EXPECT_EQ(profile.steps, 3u);
  EXPECT_EQ(profile.step_scope.counted_steps, (std::vector<int64_t>{3, 4}));
  const std::string text = RenderSummary(profile);
  EXPECT_TRUE(absl::StrContains(text, "Profile Summary at steps 0-5 (medians per step):\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      RenderAdditions(profile),
      "fwd/bwd/step/iter: medians per step over the 3 uncounted steps; modules: their "
      "total over those steps / steps (--steps A:B for medians); counted steps left out "
      "(replay-slowed): 3-4"))
      << RenderAdditions(profile);

  // A daemon that sends no median: the mean, said as such.
  for (auto& phase : *report.mutable_phases()) phase.set_median_ns(0);
  const Profile means = BuildProfile(report, {});
  EXPECT_NEAR(*means.fwd_latency_s.value, 0.078890, 1e-6);
  EXPECT_TRUE(absl::StrContains(means.latency_basis, "means")) << means.latency_basis;
  // Every forward counted: no latency, and why.
  forward->set_calls(0);
  const Profile none = BuildProfile(report, {});
  EXPECT_FALSE(none.fwd_latency_s.value.has_value());
  EXPECT_EQ(none.fwd_latency_s.note, "every 'forward' ran in a counted step");
}

// Sets a StepLatency from its samples (median, min and max as the daemon's Summarize takes them).
void SetLatency(const std::vector<int64_t>& samples_ns, flopscope::v1::StepLatency* latency) {
  std::vector<int64_t> sorted = samples_ns;
  std::sort(sorted.begin(), sorted.end());
  const size_t middle = sorted.size() / 2;
  latency->set_samples(static_cast<uint32_t>(sorted.size()));
  latency->set_median_ns(sorted.size() % 2 ? sorted[middle]
                                           : (sorted[middle - 1] + sorted[middle]) / 2);
  latency->set_min_ns(sorted.front());
  latency->set_max_ns(sorted.back());
  latency->set_gpu(true);
}

// The H200's counted torch job (2026-11-26): every TransformerEncoderLayer's Linear showed 3x its
// forward MACs, its backward kernels having run under its range. Where the daemon splits a
// module's counted FLOPs by pass, DeepSpeed's tree shows the forward ones (MACs and FLOPS too).
TEST(ProfileModelTest, CountedModuleFlopsShowTheForwardPassWhereTheyAreSplit) {
  Report report = BertLargeReport();  // marks `forward` and `backward` phases
  ModuleStats* top = report.mutable_modules(0);
  top->set_flops(3e12);  // forward 1e12, backward 2e12
  top->set_fwd_flops(1e12);
  top->set_bwd_flops(2e12);
  top->add_flops_by_precision()->set_precision("tensor:fp16");
  top->mutable_flops_by_precision(0)->set_flops(3e12);
  top->set_counted_steps(1);
  const Profile profile = BuildProfile(report, {});
  const ModuleRow& row = profile.modules[0];
  EXPECT_DOUBLE_EQ(*row.flops, 1e12);
  EXPECT_DOUBLE_EQ(*row.macs, 0.5e12);
  EXPECT_DOUBLE_EQ(*row.all_passes_flops, 3e12);
  EXPECT_DOUBLE_EQ(*row.bwd_flops, 2e12);
  EXPECT_DOUBLE_EQ(*row.flops_per_s.value, 1e12 / row.latency_s);
  const std::string text =
      RenderReportJson(report, [&](JsonWriter& json) { WriteProfileJson(profile, json); });
  EXPECT_TRUE(absl::StrContains(text, "\"all_passes_flops\": 3e+12")) << text;

  // Without the split (an older file, no pass open at the launches) the whole figure stays.
  top->clear_fwd_flops();
  top->clear_bwd_flops();
  const Profile unsplit = BuildProfile(report, {});
  EXPECT_DOUBLE_EQ(*unsplit.modules[0].flops, 3e12);
  EXPECT_FALSE(unsplit.modules[0].all_passes_flops.has_value());
}

TEST(ProfileModelTest, AStepWindowGivesModulesTheirForwardMedianAndBackwardApart) {
  Report report = BertLargeReport();  // marks `forward` and `backward` phases
  ModuleStats* top = report.mutable_modules(0);
  top->set_gpu_time_ns(900'000'000);  // the whole run: not what a window shows
  top->set_kernels(40);
  const std::vector<int64_t> forward = {75'000'000, 76'000'000, 77'000'000, 81'500'000};
  const std::vector<int64_t> backward = {150'000'000, 151'000'000, 149'000'000, 160'000'000};
  std::vector<int64_t> both;
  for (size_t i = 0; i < forward.size(); ++i) both.push_back(forward[i] + backward[i]);
  SetLatency(both, top->mutable_step_latency());
  SetLatency(forward, top->mutable_fwd_step_latency());
  SetLatency(backward, top->mutable_bwd_step_latency());
  ModuleStats* idle = report.add_modules();  // ran only outside the window
  idle->set_path("BertForPreTrainingPreLN/pooler");
  idle->set_name("pooler");
  idle->set_depth(1);
  idle->set_cpu_time_ns(5'000'000);
  report.mutable_steps()->set_requested(true);
  report.mutable_steps()->set_first_step(2);
  report.mutable_steps()->set_last_step(5);
  report.mutable_steps()->set_uncounted_steps(4);
  const Profile profile = BuildProfile(report, {});
  ASSERT_EQ(profile.modules.size(), 2u);
  const ModuleRow& row = profile.modules[0];
  const flopscope::v1::StepLatency& fwd = top->fwd_step_latency();
  EXPECT_DOUBLE_EQ(row.latency_s, fwd.median_ns() / 1e9) << "forward ranges only";
  EXPECT_TRUE(row.latency_is_gpu);
  EXPECT_DOUBLE_EQ(*row.latency_min_s, fwd.min_ns() / 1e9);
  EXPECT_DOUBLE_EQ(*row.latency_max_s, fwd.max_ns() / 1e9);
  ASSERT_TRUE(row.bwd_latency_s.has_value());
  EXPECT_DOUBLE_EQ(*row.bwd_latency_s, top->bwd_step_latency().median_ns() / 1e9);
  EXPECT_EQ(profile.modules[1].latency_s, 0);
  EXPECT_FALSE(profile.modules[1].latency_max_s.has_value());
  const std::string text = RenderProfileText(profile, {});
  EXPECT_TRUE(absl::StrContains(text, "Profile Summary at steps 2-5 (medians per step):\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "medians per step over the 4 uncounted steps")) << text;
  EXPECT_TRUE(
      absl::StrContains(text, absl::StrCat(DurationToString(row.latency_s), " = 100% latency, ")))
      << text;
  // The backward latency is an addition, never in DeepSpeed's detailed lines.
  const std::string bwd = DurationToString(*row.bwd_latency_s);
  const size_t additions = text.find("flopscope additions");
  ASSERT_NE(additions, std::string::npos);
  EXPECT_EQ(text.substr(0, additions).find(bwd), std::string::npos) << text;
  EXPECT_NE(text.find(bwd, additions), std::string::npos) << text;
}

TEST(ProfileModelTest, ClassNamesFallBackToTheNameWithoutItsIndex) {
  EXPECT_EQ(ClassFromName("layer.3"), "layer");
  EXPECT_EQ(ClassFromName("Qwen2DecoderLayer_13"), "Qwen2DecoderLayer");
  EXPECT_EQ(ClassFromName("0"), "0");
  EXPECT_EQ(ClassFromName("v1.x"), "v1.x");
  EXPECT_EQ(ClassFromName("attention"), "attention");
}

// One module of an announced tree (docs/marks.md): its marks, and the range path it ran under
// ("" when it never ran).
struct TreeModule {
  std::string path;
  std::string parent;
  std::string class_name;
  uint64_t params = 0;
  std::string ran_as;
  int64_t cpu_ns = 0;
};

// TinyLM in model order: a ModuleList of two blocks, a module that never runs and a head that
// runs inside the second block's forward (a `range_module` alias).
std::vector<TreeModule> TinyLmTree() {
  return {
      {"TinyLM", "", "TinyLM", 1100, "TinyLM", 9'000},
      {"TinyLM/embed", "TinyLM", "Embedding", 100, "TinyLM/embed", 1'000},
      {"TinyLM/layers", "TinyLM", "ModuleList", 600, "", 0},
      {"TinyLM/layers.0", "TinyLM/layers", "Block", 300, "TinyLM/layers.0", 3'000},
      {"TinyLM/layers.0/attn", "TinyLM/layers.0", "Attention", 300, "TinyLM/layers.0/attn", 2'000},
      {"TinyLM/layers.1", "TinyLM/layers", "Block", 300, "TinyLM/layers.1", 4'000},
      {"TinyLM/layers.1/attn", "TinyLM/layers.1", "Attention", 300, "TinyLM/layers.1/attn", 2'500},
      {"TinyLM/unused", "TinyLM", "Linear", 250, "", 0},
      {"TinyLM/head", "TinyLM", "Linear", 150, "TinyLM/layers.1/head", 500}};
}

// The daemon's rows (by range path, depth from the ranges) and every mark of the tree.
Report TreeReport(const std::vector<TreeModule>& tree) {
  Report report;
  report.set_job_id("tree");
  report.add_ranks()->set_world_size(1);
  for (size_t i = 0; i < tree.size(); ++i) {
    const TreeModule& module = tree[i];
    Announce(&report, "module " + module.path,
             module.parent.empty() ? absl::StrCat(i) : absl::StrCat(i, " ", module.parent));
    Announce(&report, "class " + module.path, module.class_name);
    Announce(&report, "params " + module.path, absl::StrCat(module.params));
    if (module.ran_as.empty()) continue;
    if (module.ran_as != module.path)
      Announce(&report, "range_module " + module.ran_as, module.path);
    ModuleStats* stats = report.add_modules();
    stats->set_path(module.ran_as);
    stats->set_name(module.ran_as.substr(module.ran_as.rfind('/') + 1));
    stats->set_depth(
        static_cast<uint32_t>(std::count(module.ran_as.begin(), module.ran_as.end(), '/')));
    stats->set_calls(1);
    stats->set_cpu_time_ns(module.cpu_ns);
    stats->set_params(module.params);
  }
  return report;
}

// Depth of a tree module: one more than its parent's.
uint32_t TreeDepth(const std::vector<TreeModule>& tree, const std::string& path) {
  for (const TreeModule& module : tree) {
    if (module.path == path) return module.parent.empty() ? 0 : TreeDepth(tree, module.parent) + 1;
  }
  return 0;
}

TEST(ProfileModelTest, TheAnnouncedTreeGivesEveryModuleInModelOrder) {
  const std::vector<TreeModule> tree = TinyLmTree();
  const Profile profile = BuildProfile(TreeReport(tree), {});
  ASSERT_EQ(profile.modules.size(), tree.size());
  EXPECT_EQ(profile.model_end, tree.size());
  for (size_t i = 0; i < tree.size(); ++i) {
    const ModuleRow& row = profile.modules[i];
    SCOPED_TRACE(tree[i].path);
    EXPECT_EQ(row.path, tree[i].ran_as.empty() ? tree[i].path : tree[i].ran_as);
    EXPECT_EQ(row.depth, TreeDepth(tree, tree[i].path));
    EXPECT_EQ(row.class_name, tree[i].class_name);
    ASSERT_TRUE(row.params.has_value());
    EXPECT_DOUBLE_EQ(*row.params, static_cast<double>(tree[i].params));
    // A module that never ran shows its children's latency, as DeepSpeed adds them up.
    int64_t own_ns = tree[i].cpu_ns;
    for (const TreeModule& child : tree) {
      if (tree[i].ran_as.empty() && child.parent == tree[i].path) own_ns += child.cpu_ns;
    }
    EXPECT_DOUBLE_EQ(row.latency_s, static_cast<double>(own_ns) / 1e9);
    EXPECT_FALSE(row.params_from_children);
    EXPECT_EQ(row.never_ran, tree[i].ran_as.empty());
  }
  // print(model)'s heads: the container, then its children by their index in it.
  const std::string text = RenderDetailed(profile, {});
  const size_t list = text.find("(layers): ModuleList(");
  const size_t first = text.find("(0): Block(");
  const size_t second = text.find("(1): Block(");
  ASSERT_NE(list, std::string::npos) << text;
  EXPECT_LT(list, first) << text;
  EXPECT_LT(first, second) << text;
  EXPECT_NE(text.find("(unused): Linear("), std::string::npos) << text;
  EXPECT_NE(text.find("(head): Linear("), std::string::npos) << text;
}

TEST(ProfileModelTest, UnannouncedRowsStayUnderTheirRangeParentAndOtherRootsAfterTheModel) {
  std::vector<TreeModule> tree = TinyLmTree();
  Report report = TreeReport(tree);
  // A module built inside attn's forward (no `module` mark) and a loss root of its own.
  const std::string inner = tree[4].ran_as + "/inner";
  ModuleStats* stats = report.add_modules();
  stats->set_path(inner);
  stats->set_name("inner");
  stats->set_depth(3);
  stats->set_calls(1);
  stats->set_cpu_time_ns(700);
  ModuleStats* loss = report.mutable_modules()->Add();
  loss->set_path("CrossEntropyLoss");
  loss->set_name("CrossEntropyLoss");
  loss->set_calls(1);
  loss->set_cpu_time_ns(300);
  // The daemon's order puts the loss first: the model still leads.
  std::rotate(report.mutable_modules()->begin(), report.mutable_modules()->end() - 1,
              report.mutable_modules()->end());
  Announce(&report, "module CrossEntropyLoss", "0");
  const Profile profile = BuildProfile(report, {});
  ASSERT_EQ(profile.modules.size(), tree.size() + 2);
  EXPECT_EQ(profile.model_end, tree.size() + 1);
  EXPECT_EQ(profile.modules[5].path, inner);  // right after layers.0/attn
  EXPECT_EQ(profile.modules[5].depth, TreeDepth(tree, tree[4].path) + 1);
  EXPECT_EQ(profile.modules.back().path, "CrossEntropyLoss");
  EXPECT_EQ(profile.modules.back().depth, 0u);
}

TEST(ProfileModelTest, EstimatedFlopsFillModulesWithoutCountsAndAreLabelled) {
  const std::vector<TreeModule> tree = TinyLmTree();
  Report report = TreeReport(tree);
  const double counted = 5e6, estimate_of_counted = 4e6, estimate = 3e6, estimated_macs = 1.4e6;
  for (auto& module : *report.mutable_modules()) {
    if (module.path() == "TinyLM/layers.0/attn") module.set_flops(counted);
  }
  Announce(&report, "estimated_flops TinyLM/layers.0/attn", absl::StrCat(estimate_of_counted));
  Announce(&report, "estimated_flops TinyLM/embed", absl::StrCat(estimate));
  Announce(&report, "estimated_macs TinyLM/embed", absl::StrCat(estimated_macs));
  const Profile profile = BuildProfile(report, {});
  const auto row_of = [&](const std::string& path) {
    return *std::find_if(profile.modules.begin(), profile.modules.end(),
                         [&](const ModuleRow& row) { return row.path == path; });
  };
  const ModuleRow embed = row_of("TinyLM/embed");
  EXPECT_DOUBLE_EQ(*embed.flops, estimate);
  EXPECT_DOUBLE_EQ(*embed.macs, estimated_macs);
  EXPECT_EQ(FlopsSourceOf(embed), "estimated");
  EXPECT_FALSE(embed.estimated_flops.has_value());
  const ModuleRow attn = row_of("TinyLM/layers.0/attn");
  EXPECT_DOUBLE_EQ(*attn.flops, counted);
  EXPECT_EQ(FlopsSourceOf(attn), "measured");
  EXPECT_DOUBLE_EQ(*attn.estimated_flops, estimate_of_counted);
  EXPECT_EQ(FlopsSourceOf(row_of("TinyLM/unused")), "");

  const std::string additions = RenderAdditions(profile);
  const size_t table = additions.find("measured or announced against estimated");
  ASSERT_NE(table, std::string::npos) << additions;
  const size_t attn_at = additions.find("attn", table);
  const std::string ratio_line = additions.substr(attn_at, additions.find('\n', attn_at) - attn_at);
  EXPECT_TRUE(absl::StrContains(ratio_line, RoundedG(counted / estimate_of_counted))) << ratio_line;
  EXPECT_TRUE(absl::StrContains(ratio_line, "measured")) << ratio_line;
  EXPECT_EQ(additions.find("embed", table), std::string::npos) << additions;

  const std::string text =
      RenderReportJson(report, [&](JsonWriter& json) { WriteProfileJson(profile, json); });
  EXPECT_TRUE(absl::StrContains(text, "\"flops_source\": \"estimated\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"flops_source\": \"measured\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"flops_source\": null")) << text;
}

// A producer's mark is text: "1e400" parses to infinity and "nan" to NaN. Such a figure is not
// a number of FLOPs, so it is ignored like a negative one (reliability campaign, row 3a: a
// `flops p=1e400` mark made the summary say "fwd flops per GPU: inf T").
TEST(ProfileModelTest, NonFiniteAnnouncementsAreIgnored) {
  const std::vector<TreeModule> tree = TinyLmTree();
  Report report = TreeReport(tree);
  const double announced = 2e6;
  Announce(&report, "flops TinyLM/embed", "1e400");
  Announce(&report, "macs TinyLM/embed", "inf");
  Announce(&report, "estimated_flops TinyLM/layers.0/attn", "nan");
  Announce(&report, "flops TinyLM/unused", absl::StrCat(announced));
  const Profile profile = BuildProfile(report, {});
  for (const ModuleRow& row : profile.modules) {
    if (row.path == "TinyLM/unused") {
      ASSERT_TRUE(row.flops.has_value());
      EXPECT_DOUBLE_EQ(*row.flops, announced);
      continue;
    }
    EXPECT_FALSE(row.flops.has_value()) << row.path;
    EXPECT_FALSE(row.macs.has_value()) << row.path;
    EXPECT_FALSE(row.estimated_flops.has_value()) << row.path;
  }
  EXPECT_FALSE(absl::StrContains(RenderSummary(profile), "inf")) << RenderSummary(profile);
}

// Issue 32: figures that misled without a word.

// The summary line `label`, as RenderSummary / RenderAdditions print it (70 columns, 2 blanks).
std::string SummaryLine(const std::string& text, const std::string& label) {
  const size_t at = text.find("\n" + label);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at + 1);
  return text.substr(at + 1, end - at - 1);
}

// BERT with its model FLOPs estimated by the torch hooks instead of counted, as on a run
// without FLOPSCOPE_COUNTERS: every FLOPs figure says "estimated" and the additions say how to
// get measured ones.
TEST(ProfileModelTest, EveryFlopsFigureSaysWhereItsFlopsComeFrom) {
  Report report = BertLargeReport();
  report.mutable_modules(0)->clear_flops();
  Announce(&report, "estimated_flops BertForPreTrainingPreLN", "6279860000000");
  const Profile estimated = BuildProfile(report, {});
  const std::string text = RenderSummary(estimated) + RenderAdditions(estimated);
  for (const char* label :
       {"fwd MACs per GPU: ", "fwd flops per GPU: ", "fwd flops of model = ",
        "fwd FLOPS per GPU = ", "bwd FLOPS per GPU = ", "fwd+bwd FLOPS per GPU = ",
        "FLOPS per GPU = 3 * fwd flops", "bwd flops per GPU: "}) {
    EXPECT_TRUE(absl::StrContains(SummaryLine(text, label), "estimated")) << label << "\n" << text;
  }
  const std::string hint = SummaryLine(text, "measured flops: ");
  EXPECT_TRUE(absl::StrContains(hint, "FLOPSCOPE_COUNTERS=steps=")) << text;
  EXPECT_TRUE(absl::StrContains(hint, "flopscope profile bert --count N")) << text;

  // Counted: "measured", and no hint.
  const Profile counted = BuildProfile(BertLargeReport(), {});
  const std::string counted_text = RenderSummary(counted) + RenderAdditions(counted);
  for (const char* label :
       {"fwd flops per GPU: ", "fwd flops of model = ", "fwd FLOPS per GPU = "}) {
    EXPECT_TRUE(absl::StrContains(SummaryLine(counted_text, label), "(measured)")) << label << "\n"
                                                                                   << counted_text;
  }
  EXPECT_EQ(SummaryLine(counted_text, "measured flops: "), "") << counted_text;

  // Announced by the framework.
  Report announced_report = BertLargeReport();
  announced_report.mutable_modules(0)->clear_flops();
  Announce(&announced_report, "flops BertForPreTrainingPreLN", "6279860000000");
  const Profile announced = BuildProfile(announced_report, {});
  EXPECT_TRUE(absl::StrContains(SummaryLine(RenderSummary(announced), "fwd flops per GPU: "),
                                "(announced)"))
      << RenderSummary(announced);
}

TEST(ProfileModelTest, UnfinishedStepsAreSaidInOneLine) {
  Report report = BertLargeReport();
  flopscope::v1::StepWindow* steps = report.mutable_steps();
  steps->set_first_step(1);
  steps->set_last_step(4);
  steps->set_uncounted_steps(3);
  steps->add_unfinished_steps(4);
  const Profile profile = BuildProfile(report, {});
  const std::string line = SummaryLine(RenderAdditions(profile), "unfinished steps: ");
  EXPECT_TRUE(absl::StrContains(line, "step 4 did not finish")) << RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(line, "left out of every figure")) << line;
  EXPECT_EQ(SummaryLine(RenderAdditions(BuildProfile(BertLargeReport(), {})), "unfinished"), "");
  // The summary's header names the window's steps: it says the unfinished one is in no figure
  // (it said "steps 1-4 (medians per step)" as if step 4 were in the medians).
  const std::string summary = RenderSummary(profile);
  EXPECT_TRUE(absl::StrContains(summary, "(medians per step; step 4 unfinished, left out):"))
      << summary;
}

// DeepSpeed's samples/s divides by the iter latency (fwd + bwd + step); the time between steps
// (data loading) is in the step-to-step period only.
TEST(ProfileModelTest, SamplesPerSecondOverTheStepToStepPeriodStandsBesideDeepSpeeds) {
  Report report = BertLargeReport();
  report.mutable_steps()->set_uncounted_steps(3);
  flopscope::v1::StepLatency* period = report.mutable_steps()->mutable_step_period();
  period->set_samples(3);
  period->set_median_ns(250'000'000);  // 184.73 ms of iter latency, the rest data loading
  const Profile profile = BuildProfile(report, {});
  ASSERT_TRUE(profile.samples_per_s_step_to_step.value.has_value());
  EXPECT_DOUBLE_EQ(*profile.samples_per_s_step_to_step.value, 80 / 0.25);
  const std::string additions = RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(
      SummaryLine(additions, "samples/second over the step-to-step period: "), "320.0"))
      << additions;
  EXPECT_TRUE(absl::StrContains(SummaryLine(additions, "step-to-step period"), "250 ms"))
      << additions;
  // DeepSpeed's own figure is untouched.
  EXPECT_TRUE(absl::StrContains(SummaryLine(RenderSummary(profile), "samples/second: "), "433.07"));
}

// An fp32 model whose FLOPs the torch hooks estimated: MFU against the fp32 peak, said so.
TEST(ProfileModelTest, MfuUsesThePrecisionTheFlopsWereEstimatedIn) {
  Report report = BertLargeReport();
  report.clear_metadata();
  Announce(&report, "batch_size", "80");
  report.mutable_modules(0)->clear_flops();
  Announce(&report, "estimated_flops BertForPreTrainingPreLN", "6279860000000");
  Announce(&report, "estimated_precision", "fp32");
  const Profile profile = BuildProfile(report, {});
  EXPECT_EQ(profile.precision, "fp32");
  ASSERT_TRUE(profile.mfu.value.has_value()) << profile.mfu.note;
  EXPECT_TRUE(absl::StrContains(profile.mfu.note, "fp32")) << profile.mfu.note;
  EXPECT_TRUE(absl::StrContains(profile.mfu.note, "estimated")) << profile.mfu.note;
  EXPECT_FALSE(absl::StrContains(profile.mfu.note, "assumed")) << profile.mfu.note;
}

// BERT-Large trained with `micro_batches` micro-batches per optimizer step over 3 steps, as the
// daemon reports it: each step holds that many forward and backward phases (the README's times
// each), the model's FLOPs and time per step are that many forwards', the optimizer runs once.
Report AccumulatedBertReport(uint32_t micro_batches) {
  Report report = BertLargeReport();
  const uint32_t steps = 3;
  ModuleStats* top = report.mutable_modules(0);
  top->set_flops(top->flops() * micro_batches);
  top->set_cpu_time_ns(top->cpu_time_ns() * micro_batches * steps);
  top->mutable_fwd_step_latency()->set_samples(steps);
  top->mutable_fwd_step_latency()->set_median_ns(top->cpu_time_ns() / steps);
  top->mutable_bwd_step_latency()->set_samples(steps);
  top->mutable_bwd_step_latency()->set_median_ns(2 * top->cpu_time_ns() / steps);
  *top->mutable_step_latency() = top->bwd_step_latency();
  for (auto& phase : *report.mutable_phases()) {
    const uint32_t per_step = phase.name() == "optimizer" ? 1 : micro_batches;
    phase.set_calls(per_step * steps);
    phase.set_cpu_time_ns(phase.cpu_time_ns() * per_step * steps);
    phase.set_median_ns(phase.median_ns() * per_step);
    phase.set_min_ns(phase.min_ns() * per_step);
    phase.set_max_ns(phase.max_ns() * per_step);
    phase.set_occurrences_per_step(per_step);
  }
  flopscope::v1::PhaseStats* step = report.add_phases();
  step->set_name("step");
  step->set_calls(steps);
  step->set_median_ns(report.phases(0).median_ns() + report.phases(1).median_ns() +
                      report.phases(2).median_ns());
  step->set_occurrences_per_step(1);
  report.mutable_steps()->set_requested(true);
  report.mutable_steps()->set_first_step(1);
  report.mutable_steps()->set_last_step(steps);
  report.mutable_steps()->set_uncounted_steps(steps);
  report.mutable_steps()->mutable_step_period()->set_median_ns(step->median_ns() + 5'000'000);
  return report;
}

// DeepSpeed's profiler prints one micro-batch's forward (its profile restarts at every forward):
// with k forward phases per step the DeepSpeed section is per micro-batch, iter latency the
// optimizer step's, as DeepSpeed's timers hold it at the accumulation boundary.
TEST(ProfileModelTest, GradientAccumulationGivesPerMicroBatchFiguresAndSaysSo) {
  const uint32_t k = 3;
  const Report accumulated = AccumulatedBertReport(k);
  const Profile one = BuildProfile(AccumulatedBertReport(1), {});
  const Profile profile = BuildProfile(accumulated, {});
  EXPECT_EQ(one.micro_batches, 1u);
  EXPECT_EQ(profile.micro_batches, k);
  for (auto [got, want] : {std::pair{&profile.fwd_macs_per_gpu, &one.fwd_macs_per_gpu},
                           std::pair{&profile.fwd_flops_per_gpu, &one.fwd_flops_per_gpu},
                           std::pair{&profile.fwd_latency_s, &one.fwd_latency_s},
                           std::pair{&profile.bwd_latency_s, &one.bwd_latency_s},
                           std::pair{&profile.step_latency_s, &one.step_latency_s},
                           std::pair{&profile.fwd_flops_per_s, &one.fwd_flops_per_s},
                           std::pair{&profile.fwd_bwd_flops_per_s, &one.fwd_bwd_flops_per_s},
                           std::pair{&profile.mfu, &one.mfu}}) {
    ASSERT_TRUE(got->value.has_value()) << got->note;
    EXPECT_DOUBLE_EQ(*got->value, *want->value);
  }
  ASSERT_GT(one.modules[0].latency_s, 0);
  EXPECT_DOUBLE_EQ(profile.modules[0].latency_s, one.modules[0].latency_s);
  EXPECT_DOUBLE_EQ(*profile.modules[0].bwd_latency_s, *one.modules[0].bwd_latency_s);
  EXPECT_DOUBLE_EQ(*profile.modules[0].macs, *one.modules[0].macs);
  // The optimizer step: k forwards, k backwards and one update; what runs over it, one
  // micro-batch's flops and samples (DeepSpeed's figures at the boundary).
  const double fwd = *one.fwd_latency_s.value, bwd = *one.bwd_latency_s.value;
  const double iter = k * (fwd + bwd) + *one.step_latency_s.value;
  EXPECT_DOUBLE_EQ(*profile.iter_latency_s.value, iter);
  EXPECT_DOUBLE_EQ(*profile.fwd_bwd_step_flops_per_s.value,
                   3 * *one.fwd_flops_per_gpu.value / iter);
  EXPECT_DOUBLE_EQ(*profile.samples_per_s.value, *one.batch_size / iter);
  const double period = accumulated.steps().step_period().median_ns() / 1e9;
  EXPECT_DOUBLE_EQ(*profile.samples_per_s_step_to_step.value,
                   static_cast<double>(*one.batch_size) * k / period);
  EXPECT_DOUBLE_EQ(*one.samples_per_s_step_to_step.value,
                   static_cast<double>(*one.batch_size) /
                       (AccumulatedBertReport(1).steps().step_period().median_ns() / 1e9));

  const std::string summary = RenderSummary(profile);
  EXPECT_EQ(SummaryLine(summary, "fwd MACs per GPU: "),
            SummaryLine(RenderSummary(one), "fwd MACs per GPU: "));
  EXPECT_TRUE(absl::StrContains(SummaryLine(summary, "iter latency: "), DurationToString(iter)))
      << summary;
  const std::string line = SummaryLine(RenderAdditions(profile), "gradient accumulation: ");
  EXPECT_TRUE(absl::StrContains(line, absl::StrCat(k, " micro-batches per optimizer step")))
      << line;
  EXPECT_TRUE(absl::StrContains(line, absl::StrCat("per optimizer step: x", k))) << line;
  const std::string json =
      RenderReportJson(accumulated, [&](JsonWriter& out) { WriteProfileJson(profile, out); });
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat("\"micro_batches_per_step\": ", k))) << json;

  // One micro-batch per step changes nothing: no line, no key, DeepSpeed's sum as iter latency.
  EXPECT_EQ(SummaryLine(RenderAdditions(one), "gradient accumulation: "), "");
  EXPECT_FALSE(absl::StrContains(
      RenderReportJson(accumulated, [&](JsonWriter& out) { WriteProfileJson(one, out); }),
      "micro_batches_per_step"));
  EXPECT_DOUBLE_EQ(*one.iter_latency_s.value, fwd + bwd + *one.step_latency_s.value);
  Report older = AccumulatedBertReport(1);
  for (auto& phase : *older.mutable_phases()) phase.clear_occurrences_per_step();
  EXPECT_EQ(RenderProfileText(BuildProfile(older, {}), {}), RenderProfileText(one, {}));
}

// A daemon that does not send occurrences_per_step: the forward phases over the steps, where
// they divide evenly (a short last step leaves them uneven: then nothing is divided).
TEST(ProfileModelTest, WithoutTheDaemonsCountMicroBatchesComeFromForwardsOverSteps) {
  Report report = AccumulatedBertReport(4);
  for (auto& phase : *report.mutable_phases()) phase.clear_occurrences_per_step();
  EXPECT_EQ(BuildProfile(report, {}).micro_batches, 4u);
  report.mutable_phases(0)->set_calls(report.mutable_phases(0)->calls() - 1);
  EXPECT_EQ(BuildProfile(report, {}).micro_batches, 1u);
}

TEST(ProfileModelTest, AnUnknownBatchSizeNamesFlopscopeBatchSize) {
  Report report = BertLargeReport();
  report.clear_metadata();
  const Profile profile = BuildProfile(report, {});
  const std::string text = RenderSummary(profile);
  EXPECT_TRUE(absl::StrContains(SummaryLine(text, "batch size per GPU: "), "FLOPSCOPE_BATCH_SIZE"))
      << text;
  EXPECT_TRUE(absl::StrContains(SummaryLine(text, "samples/second: "), "FLOPSCOPE_BATCH_SIZE"))
      << text;
}

}  // namespace
}  // namespace flopscope::client
