#include "client/report_text.h"

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
  const std::string text = RenderReportText(testing::CpuOnlyReport());
  EXPECT_EQ(Lines(text)[0], "flopscope report: job demo-job");
  EXPECT_EQ(LineStartingWith(text, "Ranks:"), "Ranks: 2");
  EXPECT_EQ(LineStartingWith(text, "  rank 0"), "  rank 0  host node-a  pid 101");
  EXPECT_EQ(LineStartingWith(text, "  rank 1"), "  rank 1  host node-b  pid 202");
  // batch_size is shown; the per-module params key is not repeated in the header.
  EXPECT_EQ(LineStartingWith(text, "Announced:"), "Announced: batch_size=8");
  EXPECT_EQ(LineStartingWith(text, "Lost records:"),
            "Lost records: 3 (buffer_full 3: the injector's buffer was full)");
  EXPECT_EQ(LineStartingWith(text, "No GPU records"),
            "No GPU records: no CUDA driver: NVTX ranges only");
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
                                      "kernels", "FLOPs", "params"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "Net ")),
            (std::vector<std::string>{"Net", "4", "8.00 ms", "2.00 ms", "7.00 ms", "40", "2.50 T",
                                      "1.25 M"}));
  EXPECT_EQ(
      Cells(LineStartingWith(text, "  head ")),
      (std::vector<std::string>{"head", "4", "1.00 ms", "250 us", "900 us", "10", "-", "250 K"}));
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

}  // namespace
}  // namespace flopscope::client
