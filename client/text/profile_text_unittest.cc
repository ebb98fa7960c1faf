#include "client/text/profile_text.h"

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/model/profile_model.h"
#include "client/testing/sample_report.h"
#include "client/text/deepspeed_format.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::Report;

using testing::Announce;

ModuleStats* AddModule(Report& report, const std::string& path, uint32_t depth,
                       const std::string& class_name, int64_t forward_ns, int64_t backward_ns) {
  ModuleStats* module = report.add_modules();
  module->set_path(path);
  module->set_name(path.substr(path.rfind('/') + 1));
  module->set_depth(depth);
  module->set_calls(2);
  module->set_cpu_time_ns(forward_ns + backward_ns);
  Announce(&report, "class " + path, class_name);
  auto latency = [](int64_t ns, flopscope::v1::StepLatency* out) {
    out->set_samples(1);
    out->set_median_ns(ns);
    out->set_min_ns(ns);
    out->set_max_ns(ns);
  };
  latency(forward_ns + backward_ns, module->mutable_step_latency());
  if (forward_ns > 0) latency(forward_ns, module->mutable_fwd_step_latency());
  if (backward_ns > 0) latency(backward_ns, module->mutable_bwd_step_latency());
  return module;
}

void AddPhase(Report& report, const std::string& name, int64_t ns) {
  auto* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(1);
  phase->set_cpu_time_ns(ns);
  phase->set_min_ns(ns);
  phase->set_max_ns(ns);
  phase->set_median_ns(ns);
}

// A torch job as the hooks record it: the loss root first (it ran last in the previous step's
// order and has the longest latency), then the model, whose ModuleList announces no params of
// its own; `forward` / `backward` / `optimizer` / `step` phases; a step window of one step.
struct TorchJob {
  int64_t loss_ns = 9'000'000;  // longer than the model: must still not be the model
  std::vector<int64_t> block_params = {1000, 2500};
  int64_t head_params = 300;
  int64_t block_fwd_ns = 100'000, block_bwd_ns = 250'000;
  int64_t head_fwd_ns = 40'000, head_bwd_ns = 70'000;
  int64_t model_fwd_ns = 400'000, model_bwd_ns = 800'000;
  int64_t forward_ns = 450'000, backward_ns = 900'000, optimizer_ns = 120'000;
  int64_t step_ns = 2'000'000;  // the measured step range: more than fwd + bwd + step

  Report Build() const {
    Report report;
    report.set_job_id("torch");
    report.add_ranks()->set_world_size(1);
    AddModule(report, "CrossEntropyLoss", 0, "CrossEntropyLoss", loss_ns, 0);
    AddModule(report, "Net", 0, "Net", model_fwd_ns, model_bwd_ns);
    AddModule(report, "Net/layers", 1, "ModuleList", 0, 0);  // no forward of its own
    for (size_t i = 0; i < block_params.size(); ++i) {
      const std::string path = absl::StrCat("Net/layers/", i);
      AddModule(report, path, 2, "Block", block_fwd_ns, block_bwd_ns)
          ->set_params(static_cast<uint64_t>(block_params[i]));
      // Marks write `=` as %3D and `%` as %25 (docs/marks.md).
      Announce(&report, "extra_repr " + path, absl::StrCat("width%3D", i, ", p%3D10%25"));
    }
    AddModule(report, "Net/head", 1, "Linear", head_fwd_ns, head_bwd_ns)
        ->set_params(static_cast<uint64_t>(head_params));
    AddPhase(report, "forward", forward_ns);
    AddPhase(report, "backward", backward_ns);
    AddPhase(report, "optimizer", optimizer_ns);
    AddPhase(report, "step", step_ns);
    report.mutable_steps()->set_requested(true);
    report.mutable_steps()->set_first_step(1);
    report.mutable_steps()->set_last_step(1);
    report.mutable_steps()->set_uncounted_steps(1);
    return report;
  }
};

const ModuleRow* Find(const Profile& profile, const std::string& path) {
  for (const ModuleRow& row : profile.modules) {
    if (row.path == path) return &row;
  }
  return nullptr;
}

TEST(ProfileSemanticsTest, ParamsAddUpFromChildrenAndTheModelRootComesFirst) {
  const TorchJob job;
  const Profile profile = BuildProfile(job.Build(), {});
  ASSERT_FALSE(profile.modules.empty());
  EXPECT_EQ(profile.modules[0].path, "Net");
  EXPECT_EQ(profile.model_end, profile.modules.size() - 1);  // all but the loss
  EXPECT_EQ(profile.modules.back().path, "CrossEntropyLoss");
  const double blocks = static_cast<double>(job.block_params[0] + job.block_params[1]);
  const ModuleRow* list = Find(profile, "Net/layers");
  ASSERT_NE(list, nullptr);
  EXPECT_DOUBLE_EQ(*list->params, blocks);
  EXPECT_TRUE(list->params_from_children);
  EXPECT_DOUBLE_EQ(*profile.modules[0].params, blocks + static_cast<double>(job.head_params));
  EXPECT_DOUBLE_EQ(*profile.params_per_gpu.value, *profile.modules[0].params);
}

TEST(ProfileSemanticsTest, ModuleLatencyIsForwardOnlyAndIterIsFwdPlusBwdPlusStep) {
  const TorchJob job;
  const Profile profile = BuildProfile(job.Build(), {});
  EXPECT_DOUBLE_EQ(profile.modules[0].latency_s, static_cast<double>(job.model_fwd_ns) / 1e9);
  EXPECT_DOUBLE_EQ(*profile.modules[0].bwd_latency_s, static_cast<double>(job.model_bwd_ns) / 1e9);
  EXPECT_DOUBLE_EQ(*profile.iter_latency_s.value,
                   static_cast<double>(job.forward_ns + job.backward_ns + job.optimizer_ns) / 1e9);
  EXPECT_DOUBLE_EQ(*profile.measured_step_range_s.value, static_cast<double>(job.step_ns) / 1e9);
  // The ModuleList never ran a forward of its own: 0, as DeepSpeed prints it.
  EXPECT_EQ(Find(profile, "Net/layers")->latency_s, 0);
}

TEST(ProfileSemanticsTest, PercentagesAreOfTheModelAndOtherRootsAreListedApart) {
  const TorchJob job;
  const Profile profile = BuildProfile(job.Build(), {});
  const std::string text = RenderProfileText(profile, {});
  const size_t additions = text.find("flopscope additions");
  ASSERT_NE(additions, std::string::npos) << text;
  const std::string deepspeed = text.substr(0, additions);
  // The model root is 100 % of itself, though the loss took longer.
  EXPECT_TRUE(absl::StrContains(
      deepspeed, absl::StrCat("Net(\n  ", ParamsToString(*profile.modules[0].params),
                              " = 100% Params, 0 MACs = 0% MACs, ",
                              DurationToString(profile.modules[0].latency_s), " = 100% latency")))
      << deepspeed;
  const double share = 100.0 * static_cast<double>(job.head_fwd_ns) / job.model_fwd_ns;
  EXPECT_TRUE(absl::StrContains(deepspeed, absl::StrCat(DurationToString(job.head_fwd_ns / 1e9),
                                                        " = ", RoundedG(share), "% latency")))
      << deepspeed;
  EXPECT_FALSE(absl::StrContains(deepspeed, "CrossEntropyLoss")) << deepspeed;
  EXPECT_TRUE(absl::StrContains(text.substr(additions), "CrossEntropyLoss")) << text;
  // The extra_repr follows the figures, as torch's print(model) has it.
  EXPECT_TRUE(absl::StrContains(deepspeed, "0 FLOPS, width=1, p=10%)\n")) << deepspeed;
  // Aggregated: the model's classes only.
  EXPECT_TRUE(absl::StrContains(deepspeed, "    fwd latency - {'Net': ")) << deepspeed;
}

// One line of DeepSpeed's print_model_profile output, by kind.
enum class Kind {
  kBlank,
  kBanner,
  kAt,
  kNotation,
  kSummary,
  kTop,
  kDepth,
  kAggregate,
  kLegend,
  kNote,
  kModule,
  kClose,
  kClosingRule
};

// The kinds of a flopscope text report's lines, up to and including the closing rule.
std::vector<Kind> KindsOf(const std::string& text, std::vector<std::string>* summary_labels) {
  const std::regex banner(R"(^-+ (DeepSpeed Flops Profiler|Aggregated Profile per GPU|)"
                          R"(Detailed Profile per GPU) -+$)");
  const std::regex summary(R"(^(.{70})  \S.*$)");
  const std::regex module(R"(^( *)(\([^()]+\): )?[A-Za-z_][\w.]*\((.*)$)");
  std::vector<Kind> kinds;
  bool in_notations = false;
  bool in_model = false;
  for (absl::string_view view : absl::StrSplit(text, '\n')) {
    const std::string line(view);
    std::smatch match;
    if (line == std::string(78, '-')) {
      kinds.push_back(Kind::kClosingRule);
      break;
    }
    if (line.empty()) {
      kinds.push_back(Kind::kBlank);
      in_notations = false;
    } else if (std::regex_match(line, banner)) {
      kinds.push_back(Kind::kBanner);
    } else if (absl::StartsWith(line, "Profile Summary at step")) {
      kinds.push_back(Kind::kAt);
    } else if (line == "Notations:" || in_notations) {
      kinds.push_back(Kind::kNotation);
      in_notations = true;
    } else if (absl::StartsWith(line, "Top ") && absl::EndsWith(line, "model depths:")) {
      kinds.push_back(Kind::kTop);
    } else if (std::regex_match(line, std::regex(R"(^depth \d+:$)"))) {
      kinds.push_back(Kind::kDepth);
    } else if (std::regex_match(
                   line, std::regex(R"(^    (params     |MACs       |fwd latency) - \{.*\}$)"))) {
      kinds.push_back(Kind::kAggregate);
    } else if (absl::StartsWith(line, "Each module profile") ||
               absl::StartsWith(line, "params, ")) {
      kinds.push_back(Kind::kLegend);
    } else if (std::regex_match(line, std::regex(R"(^(Note: )?\d\. .*)"))) {
      kinds.push_back(Kind::kNote);
      in_model = true;
    } else if (in_model && std::regex_match(line, std::regex(R"(^ *\)$)"))) {
      kinds.push_back(Kind::kClose);
    } else if (in_model && (std::regex_match(line, module) ||
                            std::regex_match(line, std::regex(R"(^ +\S.* Params, .*$)")))) {
      kinds.push_back(Kind::kModule);
    } else if (std::regex_match(line, match, summary)) {
      kinds.push_back(Kind::kSummary);
      std::string label = match[1].str();
      label.erase(label.find_last_not_of(' ') + 1);
      summary_labels->push_back(label);
    } else {
      ADD_FAILURE() << "a line of no DeepSpeed kind: '" << line << "'";
    }
  }
  return kinds;
}

// Collapses runs of one kind: the structure, not the counts.
std::vector<Kind> Runs(const std::vector<Kind>& kinds) {
  std::vector<Kind> runs;
  for (Kind kind : kinds) {
    if (runs.empty() || runs.back() != kind ||
        (kind != Kind::kNotation && kind != Kind::kSummary && kind != Kind::kModule &&
         kind != Kind::kNote && kind != Kind::kLegend && kind != Kind::kClose &&
         kind != Kind::kAggregate)) {
      runs.push_back(kind);
    }
  }
  return runs;
}

TEST(DeepSpeedLayoutTest, TheTextFollowsPrintModelProfileLineForLine) {
  const Profile profile = BuildProfile(TorchJob().Build(), {});
  const std::string text = RenderProfileText(profile, {});
  std::vector<std::string> labels;
  const std::vector<Kind> kinds = KindsOf(text, &labels);
  using K = Kind;
  // print_model_profile: a blank line, the banner, "Profile Summary at step N:", the notations
  // and a blank line, the summary lines, then each section after a blank line, the model and
  // the closing rule.
  const std::vector<Kind> expected = {
      K::kBlank,     K::kBanner, K::kAt,     K::kNotation, K::kBlank,     K::kSummary,
      K::kBlank,     K::kBanner, K::kTop,    K::kDepth,    K::kAggregate, K::kDepth,
      K::kAggregate, K::kBlank,  K::kBanner, K::kLegend,   K::kBlank,     K::kNote,
      K::kBlank,     K::kModule, K::kClose,  K::kModule,   K::kClose,     K::kClosingRule};
  EXPECT_EQ(Runs(kinds), expected) << text;
  // The summary's labels, in current DeepSpeed's order (with a DeepSpeed engine and
  // wall_clock_breakdown, the case that prints them all).
  const std::vector<std::string> deepspeed_labels = {
      "world size:",
      "data parallel size:",
      "model parallel size:",
      "batch size per GPU:",
      "params per GPU:",
      "params of model = params per GPU * mp_size:",
      "fwd MACs per GPU:",
      "fwd flops per GPU:",
      "fwd flops of model = fwd flops per GPU * mp_size:",
      "fwd latency:",
      "fwd FLOPS per GPU = fwd flops per GPU / fwd latency:",
      "bwd latency:",
      "bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency:",
      "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency):",
      "step latency:",
      "iter latency:",
      "FLOPS per GPU = 3 * fwd flops per GPU / iter latency:",
      "samples/second:"};
  EXPECT_EQ(labels, deepspeed_labels) << text;
  // Three notes, as DeepSpeed's; the closing rule ends the DeepSpeed part.
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), Kind::kNote), 3) << text;
  EXPECT_TRUE(absl::StrContains(text, std::string(78, '-') + "\n\n")) << text;
}

TEST(DeepSpeedLayoutTest, TheAdditionsFollowTheClosingRuleNeverInterleaved) {
  const Profile profile = BuildProfile(TorchJob().Build(), {});
  const std::string text = RenderProfileText(profile, {});
  const size_t rule = text.find("\n" + std::string(78, '-') + "\n");
  ASSERT_NE(rule, std::string::npos);
  for (const char* addition : {"MFU", "device:", "bwd latency  ", "step range (measured",
                               "flopscope additions", "Outside the model"}) {
    const size_t at = text.find(addition);
    ASSERT_NE(at, std::string::npos) << addition << "\n" << text;
    EXPECT_GT(at, rule) << addition;
  }
}

// DeepSpeed pads each summary value to 8 characters ("{:<8}") and ends a note with a blank;
// flopscope's text ends no line in blanks (they only show up in diffs and copies).
TEST(DeepSpeedLayoutTest, NoLineEndsInBlanks) {
  Report report = TorchJob().Build();
  Announce(&report, "batch_size", "4");
  for (const Report& job : {report, testing::CpuOnlyReport()}) {
    const std::string text = RenderProfileText(BuildProfile(job, {}), {});
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      EXPECT_FALSE(absl::EndsWith(line, " ")) << "'" << line << "'\n" << text;
    }
  }
}

TEST(WhyNoGpuFiguresTest, TheTextSaysWhyPerRankWhereRanksDiffer) {
  const std::string no_driver = "no CUDA driver: NVTX ranges only";
  const std::string held = "CUPTI is held by another tool (Nsight Systems): NVTX ranges only";
  Report same = TorchJob().Build();
  same.mutable_ranks(0)->set_gpu_status(no_driver);
  auto* second = same.add_ranks();
  second->set_rank(1);
  second->set_gpu_status(no_driver);
  const Profile one_reason = BuildProfile(same, {});
  const std::string text = RenderProfileText(one_reason, {});
  EXPECT_TRUE(absl::StrContains(text, "-  (no FLOPs: " + no_driver + ")")) << text;
  EXPECT_TRUE(absl::StrContains(text, "-  (" + no_driver + ")")) << text;  // the device line
  EXPECT_FALSE(absl::StrContains(text, "GPU status of rank")) << text;

  Report differ = same;
  differ.mutable_ranks(1)->set_gpu_status(held);
  const std::string per_rank = RenderProfileText(BuildProfile(differ, {}), {});
  for (const auto& [rank, status] : {std::pair{0, no_driver}, std::pair{1, held}}) {
    EXPECT_TRUE(absl::StrContains(per_rank, absl::StrCat("GPU status of rank ", rank, ": ")))
        << per_rank;
    EXPECT_TRUE(absl::StrContains(per_rank, status)) << per_rank;
  }
  EXPECT_TRUE(absl::StrContains(per_rank, "the ranks differ")) << per_rank;
}

TEST(WhyNoGpuFiguresTest, GpuRecordsWithoutACounterWindowGiveTheCommandThatOpensOne) {
  Report report = TorchJob().Build();
  report.mutable_ranks(0)->set_kernels(12);
  const Profile profile = BuildProfile(report, {});
  const std::string text = RenderProfileText(profile, {});
  EXPECT_TRUE(
      absl::StrContains(text, absl::StrCat("no counter window yet (open one: flopscope profile ",
                                           report.job_id(), " --count N)")))
      << text;
}

TEST(PartialJobTest, FewerRanksThanTheWorldSizeAreSaidAtTheTop) {
  Report report = TorchJob().Build();
  const int world_size = 8;
  report.mutable_ranks(0)->set_world_size(world_size);
  report.add_ranks()->set_rank(1);
  report.mutable_ranks(1)->set_world_size(world_size);
  const Profile profile = BuildProfile(report, {});
  const std::string expected =
      absl::StrCat(report.ranks_size(), " of ", world_size, " ranks reported");
  const std::string text = RenderProfileText(profile, {});
  EXPECT_TRUE(absl::StartsWith(text, "flopscope: warning: " + expected)) << text;
  EXPECT_TRUE(absl::StartsWith(PartialRanksLine(profile), expected));

  Report whole = TorchJob().Build();
  EXPECT_EQ(PartialRanksLine(BuildProfile(whole, {})), "");
  EXPECT_TRUE(absl::StartsWith(RenderProfileText(BuildProfile(whole, {}), {}), "\n"));
}

// Issue 15: a rank read from the file beside its usual one, which the daemon left alone (a
// directory, a symlink, a newer daemon's file), is named though every rank reported.
TEST(PartialJobTest, AFileTheDaemonLeftAloneIsNamed) {
  Report report = TorchJob().Build();
  const std::string note = "rank-00000.sqlite is a directory: left alone, not read";
  flopscope::v1::UnreadableRank* left_alone = report.add_left_alone_files();
  left_alone->set_rank(report.ranks(0).rank());
  left_alone->set_problem(note);
  const Profile profile = BuildProfile(report, {});
  EXPECT_EQ(PartialRanksLine(profile), absl::StrCat("rank ", report.ranks(0).rank(), ": ", note));
  EXPECT_TRUE(absl::StartsWith(RenderProfileText(profile, {}),
                               "flopscope: warning: " + PartialRanksLine(profile)));
}

// A rank the daemon could not read (a damaged file moved aside) is named with its problem where
// the report says it covers fewer ranks (reliability campaign, row 6: "names the bad one").
TEST(PartialJobTest, UnreadableRanksAreNamedWithTheirProblem) {
  Report report = TorchJob().Build();
  const int world_size = 2;
  report.mutable_ranks(0)->set_world_size(world_size);
  const std::string problem =
      "its damaged file was moved aside to /data/jobs/j/rank-00001.sqlite.damaged";
  auto* unreadable = report.add_unreadable_ranks();
  unreadable->set_rank(1);
  unreadable->set_problem(problem);
  const std::string line = PartialRanksLine(BuildProfile(report, {}));
  EXPECT_TRUE(absl::StartsWith(line, absl::StrCat(report.ranks_size(), " of ", world_size)))
      << line;
  EXPECT_TRUE(absl::StrContains(line, absl::StrCat("rank 1: ", problem))) << line;
  const std::string text = RenderProfileText(BuildProfile(report, {}), {});
  EXPECT_TRUE(absl::StrContains(text, problem)) << text;
}

TEST(PartialJobTest, ARankWithSeveralSessionsIsSaidToBeMerged) {
  Report report = TorchJob().Build();
  const uint32_t sessions = 2;
  report.mutable_ranks(0)->set_sessions(sessions);
  const Profile profile = BuildProfile(report, {});
  const std::string text = RenderProfileText(profile, {});
  EXPECT_TRUE(absl::StartsWith(
      text, absl::StrCat("flopscope: warning: rank 0 has ", sessions, " sessions")))
      << text;
  EXPECT_TRUE(absl::StrContains(MergedSessionsLine(profile), "own --job"));
  EXPECT_EQ(MergedSessionsLine(BuildProfile(TorchJob().Build(), {})), "");
}

TEST(ProfileSemanticsTest, EstimatedFlopsAreUsedWhereNothingWasCountedAndLabelled) {
  Report report = TorchJob().Build();
  const double head_flops = 2 * 300.0 * 8;  // a (8, 300) linear head, in the estimate's terms
  Announce(&report, "estimated_flops Net/head", absl::StrCat(head_flops));
  Announce(&report, "estimated_macs Net/head", absl::StrCat(head_flops / 2));
  const Profile profile = BuildProfile(report, {});
  const ModuleRow* head = Find(profile, "Net/head");
  ASSERT_NE(head, nullptr);
  EXPECT_DOUBLE_EQ(*head->flops, head_flops);
  EXPECT_DOUBLE_EQ(*head->macs, head_flops / 2);
  EXPECT_TRUE(head->flops_estimated);
  EXPECT_TRUE(absl::StrContains(profile.flops_source, "estimated")) << profile.flops_source;
  const std::string additions = RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(additions, "estimated")) << additions;
}

// `deepspeed_differs` marks (docs/marks.md): each reason once in the additions, with the
// modules it holds for and their flops, decoded; the DeepSpeed part of the text stays as it is.
TEST(ProfileSemanticsTest, WhereDeepSpeedDiffersEachReasonIsSaidOnceWithItsModules) {
  Report report = TorchJob().Build();
  const std::string held = "Block calls torch.nn.functional.gelu through its attribute 'act'";
  for (const char* path : {"Net/layers/0", "Net/layers/1"}) {
    Announce(&report, absl::StrCat("deepspeed_differs ", path), held);
    Announce(&report, absl::StrCat("estimated_flops ", path), "2000");
  }
  Announce(&report, "deepspeed_differs Net/head", "Linear ran with x%3D1");
  const Profile profile = BuildProfile(report, {});
  EXPECT_EQ(Find(profile, "Net/head")->deepspeed_differs, "Linear ran with x=1");
  const std::string text = RenderProfileText(profile, {});
  const std::string additions = RenderAdditions(profile);
  EXPECT_TRUE(absl::StrContains(
      additions,
      absl::StrCat("Where DeepSpeed's flops profiler prints other flops, and why:\n  ", held,
                   "\n    2 modules: Net/layers/0 (2 K flops), Net/layers/1 (2 K flops)\n"
                   "  Linear ran with x=1\n    1 module: Net/head (-")))
      << additions;
  EXPECT_GT(text.find("prints other flops"), text.find("flopscope additions")) << text;
  EXPECT_EQ(RenderAdditions(BuildProfile(TorchJob().Build(), {})).find("prints other flops"),
            std::string::npos);
}

// A run a signal ended after the injector drained it (the `process.end_signal` record of each
// session) says so in the DeepSpeed layout's additions, as the tree view does: `flopscope run`
// prints this text when a Ctrl-C'd job ends.
TEST(HowTheRunEndedTest, SessionsEndedBySignalAreNamedInTheAdditions) {
  Report report = TorchJob().Build();
  for (const char* signal_name : {"SIGINT", "SIGTERM", "SIGINT"}) {
    Announce(&report, "process.end_signal", signal_name);
  }
  const std::string text = RenderProfileText(BuildProfile(report, {}), {});
  const std::regex line(
      "\nended by: +SIGINT \\(Ctrl-C\\) 2 sessions, SIGTERM 1 session; drained first: what "
      "was recorded before the signal was delivered\n");
  EXPECT_TRUE(std::regex_search(text, line)) << text;
  EXPECT_GT(text.find("ended by:"), text.find("flopscope additions")) << text;
  const std::string undisturbed = RenderProfileText(BuildProfile(TorchJob().Build(), {}), {});
  EXPECT_EQ(undisturbed.find("ended by"), std::string::npos) << undisturbed;

  // A session whose drain was cut short before its final batch (the daemon's row) too.
  Report cut = TorchJob().Build();
  Announce(&cut, "process.end_signal_cut_short", "SIGINT");
  const std::string cut_text = RenderProfileText(BuildProfile(cut, {}), {});
  EXPECT_TRUE(
      std::regex_search(cut_text, std::regex("\\nended by: +SIGINT \\(Ctrl-C\\) 1 session whose "
                                             "drain was cut short before the final batch")))
      << cut_text;
}

// Issue 29 item 4: the additions' module table has the detailed tree's rows in its order, and
// no row says both a latency and "never ran": a container whose children ran shows their sum
// and says it is a container; a module with no latency at all says "never ran" alone.
// `compiled <model path>` (torch.compile): the modules with no range under the compiled module
// ran inside its graph and say so instead of "never ran"; a container whose children ran keeps
// its children's sum.
TEST(ProfileSemanticsTest, ModulesInsideACompiledGraphSaySoInsteadOfNeverRan) {
  Report report = testing::ContainerTreeReport();
  const std::string inside =
      "ran inside Net's torch.compile graph: no range or estimate of its own";
  EXPECT_EQ(RenderAdditions(BuildProfile(report, {})).find(inside), std::string::npos);
  testing::Announce(&report, "compiled Net", "torch.compile");
  const Profile profile = BuildProfile(report, {});
  std::vector<std::string> compiled;
  for (const ModuleRow& row : profile.modules) {
    if (row.inside_compiled.empty()) continue;
    EXPECT_EQ(row.inside_compiled, "Net");
    EXPECT_EQ(NoRangeNote(row), inside);
    compiled.push_back(TreePath(row));
  }
  // Net/layers is a container whose blocks ran: its sum stays.
  EXPECT_EQ(compiled, (std::vector<std::string>{"Net/heads", "Net/heads.spare", "Net/unused"}));
  const std::string additions = RenderAdditions(profile);
  const std::vector<std::string> pieces = absl::StrSplit(additions, inside);
  EXPECT_EQ(pieces.size(), 4u) << additions;  // once per module
  // Nothing estimated or counted: the FLOPs say why (the graph), not only that there is no GPU.
  EXPECT_TRUE(absl::StartsWith(profile.flops_source,
                               "no FLOPs: Net ran as a torch.compile graph, which the torch "
                               "hooks' estimate does not see"))
      << profile.flops_source;
}

TEST(ProfileSemanticsTest, TheAdditionsNeverPrintALatencyBesideNeverRan) {
  const Profile profile = BuildProfile(testing::ContainerTreeReport(), {});
  const std::string text = RenderProfileText(profile, {});
  const std::vector<testing::TreeLine> tree = testing::DetailedTreeLines(text);
  ASSERT_EQ(tree.size(), profile.model_end) << text;

  const std::string additions = RenderAdditions(profile);
  const size_t title = additions.find("Module latency per step");
  ASSERT_NE(title, std::string::npos) << additions;
  std::vector<std::string> lines = absl::StrSplit(additions.substr(title), '\n', absl::SkipEmpty());
  // Title, header, rule, then one row per module of the tree.
  ASSERT_GE(lines.size(), 3 + tree.size()) << additions;
  const std::regex duration(R"(\b\d+(\.\d+)? (s|ms|us|ns)\b)");
  for (size_t i = 0; i < tree.size(); ++i) {
    const std::string& line = lines[3 + i];
    SCOPED_TRACE(line);
    const ModuleRow& row = profile.modules[i];
    // Indent and name as the tree has them (the root by its name, the tree by its class).
    const std::string indent(2 + 2 * tree[i].depth, ' ');
    ASSERT_EQ(line.substr(0, indent.size()), indent);
    const std::string name =
        line.substr(indent.size(), line.find(' ', indent.size()) - indent.size());
    EXPECT_EQ(name, tree[i].depth == 0 ? row.name : tree[i].name);
    if (absl::StrContains(line, "never ran")) {
      EXPECT_FALSE(std::regex_search(line, duration)) << "a latency beside \"never ran\"";
    }
  }
  const auto line_of = [&](const std::string& model_path) {
    for (size_t i = 0; i < profile.model_end; ++i) {
      if (TreePath(profile.modules[i]) == model_path) return lines[3 + i];
    }
    return std::string();
  };
  // The ModuleList whose blocks ran: the sum of their forward and backward latencies, and what
  // it is.
  const std::string layers = line_of("Net/layers");
  EXPECT_TRUE(absl::StrContains(layers, DurationToString((300'000 + 320'000) / 1e9))) << layers;
  EXPECT_TRUE(absl::StrContains(layers, DurationToString((600'000 + 640'000) / 1e9))) << layers;
  EXPECT_TRUE(absl::StrContains(layers, "container: sum of its children")) << layers;
  EXPECT_FALSE(absl::StrContains(layers, "never ran")) << layers;
  for (const char* path : {"Net/heads", "Net/heads.spare", "Net/unused"}) {
    EXPECT_TRUE(absl::StrContains(line_of(path), "never ran")) << path << ": " << line_of(path);
  }
  EXPECT_TRUE(absl::StrContains(line_of("Net/unused"), "an unused module"));
  EXPECT_TRUE(absl::StrContains(line_of("Net/heads"), "a container none of whose modules ran"));
}

}  // namespace
}  // namespace flopscope::client
