#include "client/commands/counters_command.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/testing/json_parse_for_test.h"
#include "client/testing/process_runner.h"
#include "common/flop_formulas.h"
#include "common/json/json_writer.h"
#include "counters/metric_catalog.h"

namespace flopscope::client {
namespace {

using testing::FlattenJson;
using testing::ProcessResult;
using testing::RunProcess;

using Flat = std::map<std::string, std::string>;

CountersOptions Chip(const std::string& chip, const std::string& format = "text",
                     const std::string& set = "full") {
  CountersOptions options;
  options.chip = chip;
  options.format = format;
  options.set = set;
  options.cupti_path = "";
  return options;
}

size_t CandidateCount(const char* chip, counters::MetricSetKind kind) {
  std::vector<std::string> names;
  EXPECT_TRUE(counters::CandidateMetrics(chip, kind, &names));
  return names.size();
}

TEST(CountersCommandTest, JsonForGh100ReadsBackWithEveryMetricAndThePassCount) {
  absl::StatusOr<std::string> json = RenderCounters(Chip("GH100", "json"));
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<Flat> flat = FlattenJson(*json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << *json;
  EXPECT_EQ(flat->at("chip"), "\"GH100\"");
  EXPECT_EQ(flat->at("family"), "\"GH100\"");
  EXPECT_EQ(flat->at("set"), "\"full\"");
  EXPECT_EQ(flat->at("passes"), "6");  // cupti.md §2, NT+TC+I+T on GH100
  EXPECT_EQ(flat->at("metrics#"),
            std::to_string(CandidateCount("GH100", counters::MetricSetKind::kFull)));
  EXPECT_EQ(flat->at("rejected#"), "0");
  EXPECT_EQ(flat->at("fp16_convention"), JsonWriter::Quote(kFp16Convention));
  EXPECT_EQ(flat->at("metrics[0].name"), "\"sm__sass_thread_inst_executed_op_dadd_pred_on.sum\"");
  EXPECT_EQ(flat->at("metrics[0].measures"), "\"cuda-core-flops\"");
  EXPECT_EQ(flat->at("metrics[0].precision"), "\"fp64\"");
  EXPECT_TRUE(absl::StrContains(flat->at("metrics[0].description"), "DADD"))
      << flat->at("metrics[0].description");
  // Every tensor ops_path metric is listed with its source.
  int tensor = 0;
  for (int i = 0; flat->count(absl::StrCat("metrics[", i, "].name")); ++i) {
    if (flat->at(absl::StrCat("metrics[", i, "].measures")) == "\"tensor-flops\"") {
      ++tensor;
      EXPECT_NE(flat->at(absl::StrCat("metrics[", i, "].precision")), "\"\"");
    }
  }
  EXPECT_EQ(tensor, 5);
  EXPECT_NE(flat->at("cupti.path"), "\"\"");
}

TEST(CountersCommandTest, TextSaysPassesRejectionsAndTheFp16Convention) {
  absl::StatusOr<std::string> text = RenderCounters(Chip("gb202", "text", "cheap"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StrContains(*text, "chip GB202 (family GB20x), set cheap")) << *text;
  EXPECT_TRUE(absl::StrContains(*text, " 2 replay passes")) << *text;
  EXPECT_TRUE(absl::StrContains(*text, "rejected: none")) << *text;
  EXPECT_TRUE(absl::StrContains(*text, kFp16Convention)) << *text;
  EXPECT_TRUE(absl::StrContains(*text, "sm__inst_executed_pipe_tensor_subpipe_hmma.sum")) << *text;
  EXPECT_FALSE(absl::StrContains(*text, "ops_path_tensor")) << *text;  // cheap: no tensor FLOPs
}

TEST(CountersCommandTest, UnknownChipIsTheUsersToFixAndListsTheChipsThatWork) {
  absl::StatusOr<std::string> text = RenderCounters(Chip("TU104"));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(text.status().message(), "'TU104'")) << text.status();
  EXPECT_TRUE(absl::StrContains(text.status().message(), "GH100")) << text.status();
  EXPECT_TRUE(absl::StrContains(text.status().message(), "--list-chips")) << text.status();
}

TEST(CountersCommandTest, ProductNamesAreTheirChips) {
  for (const char* name : {"H100", "h200", "NVIDIA H100"}) {
    absl::StatusOr<std::string> text = RenderCounters(Chip(name));
    ASSERT_TRUE(text.ok()) << name << ": " << text.status();
    EXPECT_TRUE(absl::StrContains(*text, "chip GH100 (family GH100)")) << *text;
  }
  absl::StatusOr<std::string> ada = RenderCounters(Chip("RTX 4090"));
  ASSERT_TRUE(ada.ok()) << ada.status();
  EXPECT_TRUE(absl::StrContains(*ada, "chip AD102")) << *ada;
}

TEST(CountersCommandTest, ANameOfNothingListsTheChipsAndTheProductNames) {
  absl::StatusOr<std::string> text = RenderCounters(Chip("H1000"));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(text.status().message());
  EXPECT_TRUE(absl::StrContains(message, "chip 'H1000' is not known")) << message;
  EXPECT_TRUE(absl::StrContains(message, "GA10B")) << message;  // a chip of this CUPTI
  EXPECT_TRUE(absl::StrContains(message, "H100, H200")) << message;
  EXPECT_TRUE(absl::StrContains(message, "B200, GB200 -> GB100")) << message;
}

TEST(CountersCommandTest, BadOptionsAreInvalidArguments) {
  CountersOptions neither;
  EXPECT_EQ(RenderCounters(neither).status().code(), absl::StatusCode::kInvalidArgument);
  CountersOptions both = Chip("GH100");
  both.list_chips = true;
  EXPECT_EQ(RenderCounters(both).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderCounters(Chip("GH100", "xml")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderCounters(Chip("GH100", "text", "fast")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CountersCommandTest, AMissingLibcuptiIsAFailedPrecondition) {
  CountersOptions options = Chip("GH100");
  options.cupti_path = "/nonexistent/libcupti.so.13";
  absl::StatusOr<std::string> text = RenderCounters(options);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(text.status().message(), "/nonexistent/libcupti.so.13"));
}

TEST(CountersCommandTest, ListChipsMarksWhichHaveAMetricFamily) {
  CountersOptions options;
  options.list_chips = true;
  options.format = "json";
  absl::StatusOr<std::string> json = RenderCounters(options);
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<Flat> flat = FlattenJson(*json);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  std::map<std::string, std::string> family_of;
  for (int i = 0; flat->count(absl::StrCat("chips[", i, "].chip")); ++i) {
    family_of[flat->at(absl::StrCat("chips[", i, "].chip"))] =
        flat->at(absl::StrCat("chips[", i, "].family"));
  }
  EXPECT_EQ(family_of.at("\"GH100\""), "\"GH100\"");
  EXPECT_EQ(family_of.at("\"GA104\""), "\"GA10x\"");
  EXPECT_EQ(family_of.at("\"TU104\""), "null");
  options.format = "text";
  absl::StatusOr<std::string> text = RenderCounters(options);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StrContains(*text, "timing only")) << *text;
}

// ---- the built binary ----

ProcessResult Flopscope(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), FLOPSCOPE_CLI_PATH);
  env.emplace("FLOPSCOPE_CUPTI_PATH", testing::kUnset);
  return RunProcess(args, env);
}

TEST(CountersCliTest, PrintsJsonThatReadsBack) {
  const ProcessResult result = Flopscope({"counters", "--chip", "GH100", "--format", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  absl::StatusOr<Flat> flat = FlattenJson(result.out);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << result.out;
  EXPECT_EQ(flat->at("chip"), "\"GH100\"");
  EXPECT_EQ(flat->at("passes"), "6");
  EXPECT_EQ(flat->at("rejected#"), "0");
}

TEST(CountersCliTest, UnknownChipExitsTwoWithTheChipsThatWork) {
  const ProcessResult result = Flopscope({"counters", "--chip", "XY999"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
  EXPECT_TRUE(absl::StrContains(result.err, "'XY999'")) << result.err;
  EXPECT_TRUE(absl::StrContains(result.err, "GB202")) << result.err;
  EXPECT_EQ(Flopscope({"counters", "--chip", "GH100", "--set", "fast"}).exit_code, 2);
  EXPECT_EQ(Flopscope({"counters"}).exit_code, 2);
}

TEST(CountersCliTest, HonoursFlopscopeCuptiPath) {
  const ProcessResult result = Flopscope({"counters", "--list-chips"},
                                         {{"FLOPSCOPE_CUPTI_PATH", "/nonexistent/libcupti.so"}});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(absl::StrContains(result.err, "/nonexistent/libcupti.so")) << result.err;
}

}  // namespace
}  // namespace flopscope::client
