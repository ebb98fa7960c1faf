#include "client/text/report_text.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/testing/sample_report.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

// The first line starting with `prefix`, or "" when none does.
std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  for (const std::string& line : Lines(text)) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return "";
}

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, "  ", absl::SkipWhitespace())) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  return cells;
}

TEST(RenderReportTextTest, HeaderNamesJobRanksFactsLossesAndWhyThereIsNoGpuData) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  // Every per-module key of docs/marks.md (the torch hooks send the last five for each module).
  for (const char* key :
       {"class Net", "macs Net", "flops Net", "params Net", "module Net", "extra_repr Net",
        "range_module Net", "estimated_flops Net", "estimated_macs Net"}) {
    auto* mark = report.add_metadata();
    mark->set_key(key);
    mark->set_value("1");
  }
  const std::string text = RenderReportText(report);
  EXPECT_EQ(Lines(text)[0], "flopscope report: job demo-job");
  EXPECT_EQ(LineStartingWith(text, "Ranks:"), "Ranks: 2");
  EXPECT_EQ(LineStartingWith(text, "  rank 0"), "  rank 0  host node-a  pid 101");
  EXPECT_EQ(LineStartingWith(text, "  rank 1"), "  rank 1  host node-b  pid 202");
  // batch_size is shown; per-module keys are not in the header.
  EXPECT_EQ(LineStartingWith(text, "Announced:"), "Announced: batch_size=8");
  EXPECT_EQ(LineStartingWith(text, "Lost records:"),
            "Lost records: 3 (buffer_full 3: the injector's buffer was full)");
  EXPECT_EQ(LineStartingWith(text, "No GPU records"),
            "No GPU records: no CUDA driver: NVTX ranges only");
}

TEST(RenderReportTextTest, SessionsEndedWithoutFinalBatchAreSaidApart) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  auto* flag = report.add_losses();
  flag->set_cause(flopscope::v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL);
  flag->set_records(1);
  auto* missing = report.add_losses();
  missing->set_cause(flopscope::v1::LOSS_CAUSE_NOT_ARRIVED);
  missing->set_records(4);
  const std::string text = RenderReportText(report);
  // 3 buffer_full + 4 not_arrived; the session is not a record.
  EXPECT_TRUE(absl::StartsWith(LineStartingWith(text, "Lost records:"), "Lost records: 7 ("))
      << text;
  EXPECT_EQ(LineStartingWith(text, "Unfinished:"),
            "Unfinished: 1 session ended without a final batch (killed, _exit or exec?): "
            "records recorded after its last delivery are missing");
}

TEST(RenderReportTextTest, SessionsEndedBySignalAfterTheDrainAreNamed) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  for (const char* signal_name : {"SIGINT", "SIGTERM", "SIGINT"}) {
    auto* mark = report.add_metadata();
    mark->set_key("process.end_signal");
    mark->set_value(signal_name);
  }
  const std::string text = RenderReportText(report);
  EXPECT_EQ(LineStartingWith(text, "Ended by:"),
            "Ended by: SIGINT (Ctrl-C) 2 sessions, SIGTERM 1 session; drained first: what was "
            "recorded before the signal was delivered");
  EXPECT_EQ(text.find("process.end_signal"), std::string::npos) << text;  // not "Announced"
  EXPECT_EQ(text.find("killed, _exit or exec"), std::string::npos) << text;
}

// Sessions without a final batch whose drain a signal began and the daemon found cut short (its
// `process.end_signal_cut_short` rows) are named with the signal; only the others are guessed
// at, as before.
TEST(RenderReportTextTest, SessionsWhoseDrainWasCutShortAreNamedNotGuessed) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  auto* flag = report.add_losses();
  flag->set_cause(flopscope::v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL);
  flag->set_records(2);
  testing::Announce(&report, "process.end_signal_cut_short", "SIGINT");
  testing::Announce(&report, "process.end_signal", "SIGTERM");  // another session, drained
  const std::string text = RenderReportText(report);
  EXPECT_EQ(LineStartingWith(text, "Unfinished:"),
            "Unfinished: 1 session ended by SIGINT (Ctrl-C) before its final batch was delivered "
            "(the drain was cut short: the transport had not started, its bound ran out or a "
            "second signal came): records recorded after the last delivery are counted as "
            "killed; 1 session ended without a final batch (killed, _exit or exec?): records "
            "recorded after its last delivery are missing");
  EXPECT_EQ(LineStartingWith(text, "Ended by:"),
            "Ended by: SIGTERM 1 session; drained first: what was recorded before the signal was "
            "delivered; SIGINT (Ctrl-C) 1 session whose drain was cut short before the final "
            "batch: what did not arrive is counted as killed");
  EXPECT_EQ(text.find("process.end_signal"), std::string::npos) << text;  // not "Announced"

  flag->set_records(1);  // every unfinished session named: no guess left
  const std::string named = RenderReportText(report);
  EXPECT_EQ(named.find("killed, _exit or exec"), std::string::npos) << named;
}

TEST(RenderReportTextTest, ModuleTreeIsIndentedByDepthWithCallsAndCpuTimes) {
  const std::string text = RenderReportText(testing::CpuOnlyReport());
  EXPECT_EQ(Cells(LineStartingWith(text, "module")),
            (std::vector<std::string>{"module", "calls", "CPU total", "CPU/call", "params"}));
  // Net: 4 calls, 8 ms in total, 2 ms per call, 1.25 M params.
  EXPECT_EQ(Cells(LineStartingWith(text, "Net ")),
            (std::vector<std::string>{"Net", "4", "8.00 ms", "2.00 ms", "1.25 M"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "  encoder ")),
            (std::vector<std::string>{"encoder", "4", "6.00 ms", "1.50 ms", "1.00 M"}));
  // Depth 2, a name with quotes and a backslash printed as is, unknown params as "-".
  EXPECT_EQ(Cells(LineStartingWith(text, "    attn")),
            (std::vector<std::string>{"attn \"q\"\\", "8", "2.50 ms", "312 us", "-"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "  head ")),
            (std::vector<std::string>{"head", "4", "1.00 ms", "250 us", "250 K"}));
  EXPECT_EQ(LineStartingWith(text, "GPU time"), "");
  EXPECT_FALSE(absl::StrContains(text, "kernels"));
}

TEST(RenderReportTextTest, PhasesShowTotalMeanMinAndMax) {
  const std::string text = RenderReportText(testing::CpuOnlyReport());
  EXPECT_EQ(Cells(LineStartingWith(text, "step ")),
            (std::vector<std::string>{"step", "2", "9.00 ms", "4.50 ms", "4.00 ms", "5.00 ms"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "forward ")),
            (std::vector<std::string>{"forward", "2", "3.00 ms", "1.50 ms", "1.40 ms", "1.60 ms"}));
}

TEST(RenderReportTextTest, GpuColumnsAppearWithGpuRecords) {
  const std::string text = RenderReportText(testing::GpuReport());
  EXPECT_EQ(LineStartingWith(text, "No GPU records"), "");
  EXPECT_EQ(Cells(LineStartingWith(text, "module")),
            (std::vector<std::string>{"module", "calls", "CPU total", "CPU/call", "GPU time",
                                      "kernels", "FLOPs/step", "params"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "Net ")),
            (std::vector<std::string>{"Net", "4", "8.00 ms", "2.00 ms", "7.00 ms", "40", "2.50 T",
                                      "1.25 M"}));
  EXPECT_EQ(
      Cells(LineStartingWith(text, "  head ")),
      (std::vector<std::string>{"head", "4", "1.00 ms", "250 us", "900 us", "10", "-", "250 K"}));
}

TEST(RenderReportTextTest, CountedStepsConventionAndPhaseFlops) {
  flopscope::v1::Report report = testing::GpuReport();
  for (int32_t rank : {0, 1}) {
    flopscope::v1::RankCounterWindow* entry = report.add_counter_windows();
    entry->set_rank(rank);
    entry->mutable_window()->set_first_step(3);
    entry->mutable_window()->set_last_step(4);
    entry->mutable_window()->set_metric_set("full");
    entry->mutable_window()->set_passes(3);
    entry->mutable_window()->set_ranges_unmatched(rank);
    entry->mutable_window()->set_comm_kernels_excluded(3 + rank);
  }
  report.set_fp16_convention("ncu-packed-half: fp16 = 2*hadd + 2*hmul + 4*hfma");
  report.mutable_phases(1)->set_flops(1.5e12);
  const std::string text = RenderReportText(report);
  EXPECT_EQ(LineStartingWith(text, "Counted steps:"),
            "Counted steps: steps 3-4 on ranks 0-1 (set full, 3 passes, 1 unmatched)");
  EXPECT_EQ(LineStartingWith(text, "FP16 convention:"),
            "FP16 convention: ncu-packed-half: fp16 = 2*hadd + 2*hmul + 4*hfma");
  // Both ranks' windows kept their NCCL kernels out of replay (CUPTI review D1).
  EXPECT_EQ(LineStartingWith(text, "7 communication kernels"),
            "7 communication kernels excluded (never replayed: no FLOPs counted for them)");
  EXPECT_NE(LineStartingWith(text, "FLOPs/step: counted FLOPs per counted step"), "");
  EXPECT_EQ(Cells(LineStartingWith(text, "phase")),
            (std::vector<std::string>{"phase", "calls", "CPU total", "mean", "min", "max",
                                      "FLOPs/step"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "forward ")).back(), "1.50 T");
  EXPECT_EQ(Cells(LineStartingWith(text, "step ")).back(), "-");
  // Counted FLOPs by precision: the job, then each top-level row.
  flopscope::v1::PrecisionFlops* fp32 = report.mutable_modules(0)->add_flops_by_precision();
  fp32->set_precision("fp32");
  fp32->set_flops(5e11);
  flopscope::v1::PrecisionFlops* bf16 = report.mutable_modules(0)->add_flops_by_precision();
  bf16->set_precision("tensor:bf16_dst_fp32");
  bf16->set_flops(2e12);
  const std::string with_precisions = RenderReportText(report);
  EXPECT_NE(LineStartingWith(with_precisions, "Counted FLOPs per counted step by precision"), "");
  EXPECT_EQ(Cells(LineStartingWith(with_precisions, "precision")),
            (std::vector<std::string>{"precision", "job", "share", "Net"}));
  EXPECT_EQ(Cells(LineStartingWith(with_precisions, "tensor:bf16_dst_fp32")),
            (std::vector<std::string>{"tensor:bf16_dst_fp32", "2.00 T", "80.0%", "2.00 T"}));
  EXPECT_EQ(Cells(LineStartingWith(with_precisions, "fp32")),
            (std::vector<std::string>{"fp32", "500 G", "20.0%", "500 G"}));
  // No windows: no such lines.
  EXPECT_EQ(LineStartingWith(RenderReportText(testing::GpuReport()), "Counted steps:"), "");
}

TEST(RenderReportTextTest, DifferentGpuReasonsAreListedPerRank) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  report.mutable_ranks(1)->set_gpu_status("CUPTI held by nsys");
  const std::string text = RenderReportText(report);
  EXPECT_EQ(LineStartingWith(text, "No GPU records"), "No GPU records:");
  EXPECT_EQ(LineStartingWith(text, "  rank 0:"), "  rank 0: no CUDA driver: NVTX ranges only");
  EXPECT_EQ(LineStartingWith(text, "  rank 1:"), "  rank 1: CUPTI held by nsys");
}

TEST(RenderReportTextTest, RestartsAndLiveSessionsAreMentioned) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  report.mutable_ranks(0)->set_sessions(2);
  report.mutable_ranks(1)->set_connected(true);
  const std::string text = RenderReportText(report);
  EXPECT_TRUE(absl::StrContains(LineStartingWith(text, "  rank 0"), "(restarted: 2 sessions)"));
  EXPECT_TRUE(absl::StrContains(LineStartingWith(text, "  rank 1"), "(still connected)"));
}

TEST(RenderReportTextTest, EmptyReportSaysWhatIsMissing) {
  flopscope::v1::Report report;
  report.set_job_id("nothing");
  const std::string text = RenderReportText(report);
  EXPECT_TRUE(absl::StrContains(text, "Modules: none recorded")) << text;
  EXPECT_TRUE(absl::StrContains(text, "Steps and phases: none recorded")) << text;
  EXPECT_EQ(LineStartingWith(text, "Lost records"), "");
}

flopscope::v1::Report KernelReport() {
  flopscope::v1::Report report = testing::GpuReport();
  for (auto& module : *report.mutable_modules()) {
    module.set_gpu_span_ns(module.gpu_time_ns() + 1'000'000);
    module.set_gpu_busy_ns(module.gpu_time_ns());
  }
  flopscope::v1::ModuleStats& head = *report.mutable_modules(3);
  head.set_memcpy_count(2);
  head.set_memcpy_time_ns(50'000);
  head.set_memcpy_bytes(2'000'000);
  flopscope::v1::Device* device = report.mutable_ranks(0)->add_devices();
  device->set_name("NVIDIA H100 80GB HBM3");
  device->set_chip("GH100");
  device->set_sm_count(132);
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"gpu.0.name", "NVIDIA H100 80GB HBM3"},
                                                        {"gpu.status", "tracing kernels"},
                                                        {"kernels.launch_not_seen", "4"},
                                                        {"batch_size", "8"}}) {
    flopscope::v1::Metadata* entry = report.add_metadata();
    entry->set_key(key);
    entry->set_value(value);
  }
  return report;
}

TEST(RenderReportTextTest, SpanAndBusyColumnsFollowGpuTime) {
  const std::string text = RenderReportText(KernelReport());
  EXPECT_EQ(Cells(LineStartingWith(text, "module")),
            (std::vector<std::string>{"module", "calls", "CPU total", "CPU/call", "GPU time",
                                      "GPU span", "GPU busy", "kernels", "FLOPs/step", "params"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "Net ")),
            (std::vector<std::string>{"Net", "4", "8.00 ms", "2.00 ms", "7.00 ms", "8.00 ms",
                                      "7.00 ms", "40", "2.50 T", "1.25 M"}));
  EXPECT_TRUE(absl::StartsWith(LineStartingWith(text, "GPU time:"), "GPU time: kernel durations"));
}

TEST(RenderReportTextTest, MemoryActivitiesHaveTheirOwnTable) {
  const std::string text = RenderReportText(KernelReport());
  EXPECT_NE(LineStartingWith(text, "Memory copies and sets"), "");
  EXPECT_EQ(Cells(LineStartingWith(text, "  head ")).size(), 10u);  // the module row
  bool found = false;
  for (const std::string& line : Lines(text)) {
    const std::vector<std::string> cells = Cells(line);
    if (cells.size() == 7 && cells[0] == "head") {
      EXPECT_EQ(cells,
                (std::vector<std::string>{"head", "2", "50.0 us", "2.00 MB", "0", "0 ns", "0 B"}));
      found = true;
    }
  }
  EXPECT_TRUE(found) << text;
}

TEST(RenderReportTextTest, TheInjectorsGpuFactsGoToTheRankLinesNotTheAnnouncements) {
  const std::string text = RenderReportText(KernelReport());
  EXPECT_TRUE(absl::StrContains(LineStartingWith(text, "  rank 0"),
                                "gpu 0: NVIDIA H100 80GB HBM3 (GH100, 132 SMs)"));
  EXPECT_EQ(LineStartingWith(text, "Announced"), "Announced: batch_size=8");
  EXPECT_EQ(LineStartingWith(text, "GPU activities whose launch"),
            "GPU activities whose launch was not seen: 4 (listed under <unattributed>)");
}

TEST(RenderReportTextTest, TopKernelsListDemangledNamesWithShares) {
  flopscope::v1::Report report = KernelReport();
  report.set_top_kernels_of("Net/encoder");
  flopscope::v1::KernelSummary* gemm = report.add_top_kernels();
  gemm->set_name("_Z4gemmPfS_i");
  gemm->set_demangled("gemm(float*, float*, int)");
  gemm->set_count(30);
  gemm->set_total_ns(3'000'000);
  gemm->set_min_ns(90'000);
  gemm->set_max_ns(110'000);
  flopscope::v1::KernelSummary* copy = report.add_top_kernels();
  copy->set_name("[memcpy]");
  copy->set_demangled("[memcpy]");
  copy->set_kind(flopscope::v1::ACTIVITY_KIND_MEMCPY);
  copy->set_count(1);
  copy->set_total_ns(1'000'000);
  copy->set_min_ns(1'000'000);
  copy->set_max_ns(1'000'000);
  copy->set_bytes(4'000'000);
  const std::string text = RenderTopKernelsText(report);
  EXPECT_NE(LineStartingWith(text, "Top GPU activities of Net/encoder"), "");
  EXPECT_EQ(Cells(LineStartingWith(text, "gemm(")),
            (std::vector<std::string>{"gemm(float*, float*, int)", "30", "3.00 ms", "75.0%",
                                      "100 us", "90.0 us", "110 us", "-"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "[memcpy]")),
            (std::vector<std::string>{"[memcpy]", "1", "1.00 ms", "25.0%", "1.00 ms", "1.00 ms",
                                      "1.00 ms", "4.00 MB"}));
  // The module tree format carries the same list after the memory table.
  EXPECT_NE(LineStartingWith(RenderReportText(report), "Top GPU activities of"), "");
}

// Producer text never reaches the terminal raw: an escape sequence and a line break inside a
// module name, a host, a metadata value and a kernel name each become U+FFFD in place, so the
// report keeps its line structure and holds no ESC byte at all.
TEST(RenderReportTextTest, ProducerControlCharactersAreNeutralised) {
  const std::string evil = "evil\x1b[31m\nname";
  const std::string shown = "evil\xEF\xBF\xBD[31m\xEF\xBF\xBDname";
  flopscope::v1::Report report = KernelReport();
  report.set_job_id("job\x1b]0;title\x07");
  report.mutable_ranks(0)->set_host(evil);
  report.mutable_modules(0)->set_name(evil);
  auto* mark = report.add_metadata();
  mark->set_key("note");
  mark->set_value(evil);
  report.set_top_kernels_of(evil);
  flopscope::v1::KernelSummary* kernel = report.add_top_kernels();
  kernel->set_demangled(evil);
  kernel->set_count(1);
  kernel->set_total_ns(1000);
  for (const std::string& text : {RenderReportText(report), RenderTopKernelsText(report)}) {
    EXPECT_FALSE(absl::StrContains(text, "\x1b")) << text;
    EXPECT_FALSE(absl::StrContains(text, "\x07")) << text;
    EXPECT_FALSE(absl::StrContains(text, "\nname")) << text;
    EXPECT_TRUE(absl::StrContains(text, shown)) << text;
  }
  const std::string text = RenderReportText(report);
  EXPECT_TRUE(absl::StrContains(LineStartingWith(text, "  rank 0"), "host " + shown));
  EXPECT_TRUE(absl::StrContains(LineStartingWith(text, "Announced:"), "note=" + shown));
  EXPECT_EQ(Lines(text)[0], "flopscope report: job job\xEF\xBF\xBD]0;title\xEF\xBF\xBD");
}

TEST(RenderReportTextTest, LongKernelNamesAreCutBetweenCharacters) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  report.set_top_kernels_of("Net");
  flopscope::v1::KernelSummary* kernel = report.add_top_kernels();
  std::string name = "k";
  while (name.size() < 200) name += "\xE2\x82\xAC";  // euro signs, 3 bytes each
  kernel->set_demangled(name);
  kernel->set_count(1);
  const std::string text = RenderTopKernelsText(report);
  EXPECT_FALSE(absl::StrContains(text, "\xEF\xBF\xBD")) << "a character was split";
  // 87 bytes at most before "...": "k" and 28 whole euro signs.
  std::string expected = "k";
  for (int i = 0; i < 28; ++i) expected += "\xE2\x82\xAC";
  EXPECT_TRUE(absl::StrContains(text, expected + "...")) << text;
}

TEST(RenderReportTextTest, BatchesTheDaemonRejectedStandBesideTheLosses) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  EXPECT_EQ(LineStartingWith(RenderReportText(report), "Rejected by daemon"), "");
  for (int i : {0, 1}) {
    flopscope::v1::Rejection* rejection = report.mutable_ranks(i)->add_rejections();
    rejection->set_rule(i == 0 ? "ranges" : "kernels");
    rejection->set_batches(1 + i);
    rejection->set_records(40 * (1 + i));
  }
  const std::vector<std::string> lines = Lines(RenderReportText(report));
  const auto lost = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return absl::StartsWith(line, "Lost records:");
  });
  ASSERT_NE(lost, lines.end());
  ASSERT_NE(lost + 1, lines.end());
  EXPECT_EQ(*(lost + 1),
            "Rejected by daemon: 3 batches / 120 records (rule: kernels: 2 / 80; ranges: 1 / 40)");
}

TEST(RenderDropsTextTest, LossesThenRejectionsOrNothing) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  EXPECT_EQ(RenderDropsText(report),
            "Lost records: 3 (buffer_full 3: the injector's buffer was full)\n");
  flopscope::v1::Rejection* rejection = report.mutable_ranks(0)->add_rejections();
  rejection->set_rule("seq");
  rejection->set_batches(1);
  rejection->set_records(1);
  EXPECT_EQ(Lines(RenderDropsText(report))[1],
            "Rejected by daemon: 1 batch / 1 record (rule: seq: 1 / 1)");
  EXPECT_EQ(RenderDropsText(flopscope::v1::Report()), "");
}

TEST(RenderReportTextTest, AnEmptyTopKernelsListSaysSo) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  report.set_top_kernels_of("Net/head");
  EXPECT_NE(LineStartingWith(RenderTopKernelsText(report), "Top GPU activities of Net/head: none"),
            "");
}

}  // namespace
}  // namespace flopscope::client
