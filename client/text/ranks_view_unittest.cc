#include "client/text/ranks_view.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/testing/json_parse_for_test.h"
#include "client/text/memory_view.h"
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
  EXPECT_TRUE(lines[2].ends_with(" 7")) << lines[2];  // 3 + 4 lost records
  EXPECT_NE(lines[3].find("NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(lines[3].find("yes"), std::string::npos);
  EXPECT_EQ(lines[4], "No GPU records: no CUDA driver: NVTX ranges only");
}

TEST(RenderRanksTextTest, ProducerTextCannotEscapeItsCell) {
  flopscope::v1::ListRanksResponse ranks = TwoRanks();
  ranks.mutable_ranks(0)->set_host("node\x1b[31m\nred");
  ranks.mutable_ranks(0)->set_gpu_status("gone\x1b[2J");
  ranks.mutable_ranks(1)->mutable_devices(0)->set_name("H100\t\x9b");
  const std::string text = RenderRanksText(ranks);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;  // the newline in the host did not add a line
  EXPECT_NE(lines[2].find("node\xEF\xBF\xBD[31m\xEF\xBF\xBDred"), std::string::npos) << lines[2];
  // A tab is one space; a lone C1 byte (not UTF-8) is replaced too.
  EXPECT_NE(lines[3].find("H100 \xEF\xBF\xBD"), std::string::npos) << lines[3];
  EXPECT_EQ(lines[4], "No GPU records: gone\xEF\xBF\xBD[2J");
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

// Two profiles for TwoRanks(): 10 steps of 1 s and 1.5 s; forward 0.3 s and backward 0.6 s
// with 1e14 fwd FLOPs per step, so fwd+bwd FLOPS = 3e14 / 0.9 s; rank 1 is the straggler.
std::vector<RankFigures> TwoRankFigures() {
  std::vector<RankFigures> figures;
  for (int rank : {0, 1}) {
    flopscope::v1::Report report;
    report.add_ranks()->set_rank(rank);
    for (auto [name, seconds] : {std::pair<const char*, double>{"step", rank == 0 ? 1.0 : 1.5},
                                 {"forward", 0.3},
                                 {"backward", 0.6},
                                 {"optimizer", 0.05}}) {
      auto* phase = report.add_phases();
      phase->set_name(name);
      phase->set_calls(10);
      phase->set_cpu_time_ns(std::llround(seconds * 10 * 1e9));
    }
    auto* module = report.add_modules();
    module->set_path("model");
    module->set_name("model");
    module->set_flops(1e14);  // per counted step
    module->set_gpu_time_ns(std::llround((rank == 0 ? 0.8 : 1.2) * 10 * 1e9));
    figures.push_back(
        {BuildProfile(report, {.peak_tflops = 1000, .precision = std::nullopt}), std::nullopt, ""});
  }
  figures[1].straggler = Straggler{.step_s = 1.5,
                                   .median_step_s = 1.25,
                                   .excess_pct = 20,
                                   .module = "model",
                                   .module_excess_s = 0.2};
  return figures;
}

TEST(RenderRanksTextTest, TimingFlopsMfuAndTheStraggler) {
  const std::string text = RenderRanksText(TwoRanks(), TwoRankFigures());
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;
  for (const char* header : {"step", "fwd", "bwd", "opt", "FLOPS", "MFU", "slow"}) {
    EXPECT_NE(lines[0].find(header), std::string::npos) << header;
  }
  EXPECT_NE(lines[2].find("1 s"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("300 ms"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("600 ms"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("50 ms"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("333.33 TFLOPS"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("33.3%"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].find("vs"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("1.5 s"), std::string::npos) << lines[3];
  EXPECT_TRUE(lines[3].ends_with("+20.0% vs 1.25 s: model +200 ms")) << lines[3];
}

TEST(RenderRanksJsonTest, FiguresAndStragglerParseBack) {
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), TwoRankFigures()));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[0].kernels"), "0");  // the RankInfo keys are kept
  EXPECT_EQ(flat->at("ranks[0].steps"), "10");
  EXPECT_EQ(std::stod(flat->at("ranks[0].step_s")), 1.0);
  EXPECT_DOUBLE_EQ(std::stod(flat->at("ranks[0].fwd_s")), 0.3);
  EXPECT_DOUBLE_EQ(std::stod(flat->at("ranks[0].bwd_s")), 0.6);
  EXPECT_DOUBLE_EQ(std::stod(flat->at("ranks[0].opt_s")), 0.05);
  EXPECT_NEAR(std::stod(flat->at("ranks[0].flops_per_s")), 3e14 / 0.9, 1);
  EXPECT_NEAR(std::stod(flat->at("ranks[0].mfu")), 1.0 / 3, 1e-12);
  EXPECT_EQ(flat->at("ranks[0].straggler"), "null");
  EXPECT_EQ(flat->at("ranks[1].straggler.module"), "\"model\"");
  EXPECT_EQ(std::stod(flat->at("ranks[1].straggler.excess_pct")), 20);
  EXPECT_EQ(std::stod(flat->at("ranks[1].straggler.median_step_s")), 1.25);
  EXPECT_DOUBLE_EQ(std::stod(flat->at("ranks[1].straggler.module_excess_s")), 0.2);
}

TEST(RenderRanksJsonTest, ASlowerStepSaysItsCause) {
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), TwoRankFigures()));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[1].straggler.cause"), "\"slower_step\"");
  EXPECT_EQ(flat->at("ranks[1].straggler.pass"), "\"\"");
  EXPECT_EQ(std::stod(flat->at("ranks[1].straggler.waited_s")), 0);
}

TEST(RenderRanksTextTest, ASlowerStepInABackwardSaysSo) {
  std::vector<RankFigures> figures = TwoRankFigures();
  figures[1].straggler->pass = StragglerPass::kBackward;
  const std::string text = RenderRanksText(TwoRanks(), figures);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;  // no line under the table: nobody waited
  EXPECT_TRUE(lines[3].ends_with("+20.0% vs 1.25 s: model backward +200 ms")) << lines[3];
}

// Issue 31 item 3: the rank the others waited for is named with where its extra time went and
// how long they waited, in its cell, in a line of its own under the table and in the JSON.
TEST(RenderRanksTextTest, TheRankTheOthersWaitedForSaysWhereAndHowLong) {
  std::vector<RankFigures> figures = TwoRankFigures();
  figures[1].straggler = Straggler{.step_s = 1.25,
                                   .median_step_s = 1.25,
                                   .module = "model/layer.1",
                                   .module_excess_s = 0.15,
                                   .cause = StragglerCause::kWaitedFor,
                                   .pass = StragglerPass::kBackward,
                                   .waited_s = 0.16};
  std::string text = RenderRanksText(TwoRanks(), figures);
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << text;
  EXPECT_TRUE(lines[3].ends_with("others waited 160 ms: model/layer.1 backward")) << lines[3];
  EXPECT_EQ(lines[4],
            "Rank 1 held the others up: they waited 160 ms per step for its backward "
            "(model/layer.1: +150 ms above the other ranks' median)");
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), figures));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[1].straggler.cause"), "\"waited_for\"");
  EXPECT_EQ(flat->at("ranks[1].straggler.pass"), "\"backward\"");
  EXPECT_EQ(flat->at("ranks[1].straggler.module"), "\"model/layer.1\"");
  EXPECT_DOUBLE_EQ(std::stod(flat->at("ranks[1].straggler.waited_s")), 0.16);

  figures[1].straggler->pass = StragglerPass::kBetweenSteps;
  figures[1].straggler->module.clear();
  figures[1].straggler->module_excess_s = 0;
  text = RenderRanksText(TwoRanks(), figures);
  lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << text;
  EXPECT_TRUE(lines[3].ends_with("others waited 160 ms: between steps")) << lines[3];
  EXPECT_EQ(lines[4],
            "Rank 1 held the others up: they waited 160 ms per step for it between steps (its "
            "step-to-step period less its step, above the other ranks' median)");
  flat = testing::FlattenJson(RenderRanksJson(TwoRanks(), figures));
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[1].straggler.pass"), "\"between_steps\"");
  EXPECT_EQ(flat->at("ranks[1].straggler.module"), "\"\"");
}

TEST(RenderRanksTextTest, ARankWithoutFiguresSaysWhy) {
  std::vector<RankFigures> figures = TwoRankFigures();
  figures[0] = RankFigures{.profile = Profile{},
                           .straggler = std::nullopt,
                           .problem = "job 'j' rank 0: file is not a database"};
  const std::string text = RenderRanksText(TwoRanks(), figures);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << text;
  EXPECT_NE(lines[2].find("   -   "), std::string::npos) << lines[2];
  EXPECT_EQ(lines[5], "Rank 0: no figures: job 'j' rank 0: file is not a database");
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), figures));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[0].problem"), "\"job 'j' rank 0: file is not a database\"");
  EXPECT_EQ(flat->at("ranks[0].step_s"), "null");
  EXPECT_EQ(flat->at("ranks[1].problem"), "\"\"");
}

TEST(RenderRanksTextTest, ARankReadFromBesideAFileLeftAloneSaysSo) {
  std::vector<RankFigures> figures = TwoRankFigures();
  const std::string note = "rank-00001.sqlite is a symbolic link to /etc/passwd: left alone";
  figures[1].profile.left_alone_files.emplace_back(1, note);
  const std::string text = RenderRanksText(TwoRanks(), figures);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "Rank 1: " + note) << text;
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), figures));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[1].left_alone[0]"), "\"" + note + "\"");
  EXPECT_EQ(flat->count("ranks[0].left_alone[0]"), 0u);
}

// A rank whose session never delivered its final batch: named as ended by the signal its drain
// was cut short after (its own report's `process.end_signal_cut_short` row), guessed at only
// where nothing names one.
TEST(RenderRanksTextTest, ASessionWhoseDrainWasCutShortIsNamedNotGuessed) {
  flopscope::v1::ListRanksResponse ranks = TwoRanks();
  for (auto* rank : {ranks.mutable_ranks(0), ranks.mutable_ranks(1)}) {
    auto* unfinished = rank->add_losses();
    unfinished->set_cause(flopscope::v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL);
    unfinished->set_records(1);
  }
  std::vector<RankFigures> figures = TwoRankFigures();
  figures[0].profile.cut_short_signals["SIGINT"] = 1;
  const std::string text = RenderRanksText(ranks, figures);
  EXPECT_NE(text.find("\nRank 0: 1 session ended by SIGINT (Ctrl-C) before its final batch was "
                      "delivered (the drain was cut short: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nRank 1: 1 session ended without a final batch (killed, _exit or exec?)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Rank 0: 1 session ended without"), std::string::npos) << text;
}

TEST(RenderRanksJsonTest, NoFiguresNoFigureKeys) {
  const std::string json = RenderRanksJson(TwoRanks());
  EXPECT_EQ(json.find("step_s"), std::string::npos);
  EXPECT_EQ(json.find("straggler"), std::string::npos);
}

// Each rank's report carries its own `memory_ledger` mark: the cell shows held / expected, and a
// part above its formula gets a line under the table.
TEST(RenderRanksTextTest, MemoryHeldAgainstTheFormulaAndTheFlaggedPart) {
  std::vector<RankFigures> figures = TwoRankFigures();
  for (int rank : {0, 1}) {
    flopscope::v1::Report report;
    report.add_ranks()->set_rank(rank);
    auto* mark = report.add_metadata();
    mark->set_key("memory_ledger " + std::to_string(rank));
    mark->set_value(absl::StrCat("step:1 setup:zero3 dp:2 elements:1000 dtype:fp32 states:2 ",
                                 "params:", rank == 0 ? 2000 : 4000, " grads:2000 optimizer:6000"));
    figures[rank].profile.memory = BuildProfile(report, {}).memory;
  }
  const std::string text = RenderRanksText(TwoRanks(), figures);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 6u) << text;
  EXPECT_NE(lines[0].find("memory"), std::string::npos) << text;
  EXPECT_NE(lines[2].find("9.77 KiB / 9.77 KiB "), std::string::npos) << text;  // 10000 B
  EXPECT_NE(lines[3].find(" / 9.77 KiB !"), std::string::npos) << text;
  EXPECT_EQ(lines[4], "Memory above its formula: rank 1 " +
                          MemoryFlagLine(figures[1].profile.memory[0],
                                         figures[1].profile.memory[0].parts[0]));
  absl::StatusOr<std::map<std::string, std::string>> flat =
      testing::FlattenJson(RenderRanksJson(TwoRanks(), figures));
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("ranks[0].memory.flagged"), "false");
  EXPECT_EQ(flat->at("ranks[1].memory.parts.params.held"), "4000");
  EXPECT_EQ(flat->at("ranks[1].memory.flags#"), "1");
}

}  // namespace
}  // namespace flopscope::client
