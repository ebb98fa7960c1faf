#include "counters/metric_catalog.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/algorithm/container.h"
#include "common/flop_formulas.h"

namespace flopscope::counters {
namespace {

size_t CountIf(const std::vector<std::string>& names, MetricCategory category) {
  return std::count_if(names.begin(), names.end(), [category](const std::string& name) {
    return DescribeMetric(name).category == category;
  });
}

TEST(MetricCatalogTest, ParsesSetNames) {
  MetricSetKind kind = MetricSetKind::kCheap;
  ASSERT_TRUE(ParseMetricSetKind("full", &kind));
  EXPECT_EQ(kind, MetricSetKind::kFull);
  ASSERT_TRUE(ParseMetricSetKind("cheap", &kind));
  EXPECT_EQ(kind, MetricSetKind::kCheap);
  for (const char* bad : {"", "Full", "fast", "full "}) {
    EXPECT_FALSE(ParseMetricSetKind(bad, &kind)) << bad;
  }
  EXPECT_EQ(kind, MetricSetKind::kCheap);  // untouched by a failed parse
  EXPECT_STREQ(MetricSetName(MetricSetKind::kFull), "full");
  EXPECT_STREQ(MetricSetName(MetricSetKind::kCheap), "cheap");
}

TEST(MetricCatalogTest, FullIsCudaCoreTensorInstructionsAndTiming) {
  std::vector<std::string> full;
  ASSERT_TRUE(CandidateMetrics("GH100", MetricSetKind::kFull, &full));
  EXPECT_EQ(CountIf(full, MetricCategory::kCudaCoreFlops), 9u);
  EXPECT_EQ(CountIf(full, MetricCategory::kTensorFlops), 5u);  // fp16, bf16, tf32, fp64, fp8
  EXPECT_EQ(CountIf(full, MetricCategory::kTensorInstructions), 4u);
  EXPECT_TRUE(absl::c_linear_search(full, "gpu__time_duration.sum"));
  EXPECT_TRUE(absl::c_linear_search(full, "sm__cycles_elapsed.sum"));
  EXPECT_TRUE(absl::c_linear_search(full, "dram__bytes.sum"));
  EXPECT_TRUE(absl::c_linear_search(full, "sm__ops_path_tensor_src_fp16.sum"));
  EXPECT_FALSE(
      absl::c_linear_search(full, "sm__ops_path_tensor_src_fp16_dst_fp32.sum"));  // not on GH100
}

TEST(MetricCatalogTest, CheapDropsOnlyTheTensorOpsPaths) {
  for (const char* chip : {"GA100", "GA104", "AD102", "GH100", "GB100", "GB202"}) {
    std::vector<std::string> full, cheap;
    ASSERT_TRUE(CandidateMetrics(chip, MetricSetKind::kFull, &full)) << chip;
    ASSERT_TRUE(CandidateMetrics(chip, MetricSetKind::kCheap, &cheap)) << chip;
    EXPECT_EQ(CountIf(cheap, MetricCategory::kTensorFlops), 0u) << chip;
    EXPECT_GT(CountIf(full, MetricCategory::kTensorFlops), 0u) << chip;
    EXPECT_EQ(cheap.size() + CountIf(full, MetricCategory::kTensorFlops), full.size()) << chip;
    for (const std::string& name : cheap)
      EXPECT_TRUE(absl::c_linear_search(full, name)) << chip << " " << name;
  }
}

TEST(MetricCatalogTest, PackedFp32OnlyOnBlackwellDatacenter) {
  const std::string ffma2 = "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum";
  std::vector<std::string> names;
  ASSERT_TRUE(CandidateMetrics("GB100", MetricSetKind::kCheap, &names));
  EXPECT_TRUE(absl::c_linear_search(names, ffma2));
  ASSERT_TRUE(CandidateMetrics("GB202", MetricSetKind::kCheap, &names));
  EXPECT_FALSE(absl::c_linear_search(names, ffma2));
  ASSERT_TRUE(CandidateMetrics("GH100", MetricSetKind::kCheap, &names));
  EXPECT_FALSE(absl::c_linear_search(names, ffma2));
}

TEST(MetricCatalogTest, EveryFamilyChipHasCandidatesAndOthersNone) {
  const std::vector<std::string> chips = ChipsWithMetricFamily();
  for (const char* chip : {"GA100", "GA102", "GA10B", "AD104", "GH100", "GB100", "GB202"}) {
    EXPECT_TRUE(absl::c_linear_search(chips, chip)) << chip;
  }
  std::vector<std::string> names;
  for (const std::string& chip : chips) {
    EXPECT_TRUE(CandidateMetrics(chip, MetricSetKind::kFull, &names)) << chip;
    EXPECT_FALSE(MetricFamilyOf(chip).empty()) << chip;
  }
  names = {"left over"};
  for (const char* chip : {"TU104", "GV100", "", "gh100", "GH1000"}) {
    EXPECT_FALSE(CandidateMetrics(chip, MetricSetKind::kFull, &names)) << chip;
    EXPECT_TRUE(names.empty()) << chip;
    EXPECT_TRUE(MetricFamilyOf(chip).empty()) << chip;
  }
  EXPECT_EQ(MetricFamilyOf("GA104"), "GA10x");
  EXPECT_EQ(MetricFamilyOf("GH100"), "GH100");
}

TEST(MetricCatalogTest, NoCandidateIsListedTwice) {
  for (const std::string& chip : ChipsWithMetricFamily()) {
    std::vector<std::string> names;
    ASSERT_TRUE(CandidateMetrics(chip, MetricSetKind::kFull, &names));
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << chip;
  }
}

TEST(MetricCatalogTest, DescribesCudaCoreWeightsFromTheFormulas) {
  const MetricMeaning dfma = DescribeMetric("sm__sass_thread_inst_executed_op_dfma_pred_on.sum");
  EXPECT_EQ(dfma.category, MetricCategory::kCudaCoreFlops);
  EXPECT_EQ(dfma.precision, "fp64");
  EXPECT_DOUBLE_EQ(dfma.flops_per_count, 2);
  EXPECT_EQ(dfma.unit, "instruction");
  const MetricMeaning fadd = DescribeMetric("sm__sass_thread_inst_executed_op_fadd_pred_on.sum");
  EXPECT_EQ(fadd.precision, "fp32");
  EXPECT_DOUBLE_EQ(fadd.flops_per_count, 1);
  const MetricMeaning hfma = DescribeMetric("sm__sass_thread_inst_executed_op_hfma_pred_on.sum");
  EXPECT_EQ(hfma.precision, "fp16");
  EXPECT_DOUBLE_EQ(hfma.flops_per_count, 4);  // kFp16Convention: packed pair, fused
  const MetricMeaning ffma2 = DescribeMetric("sm__sass_thread_inst_executed_op_ffma2_pred_on.sum");
  EXPECT_EQ(ffma2.precision, "fp32");
  EXPECT_DOUBLE_EQ(ffma2.flops_per_count, 4);
}

TEST(MetricCatalogTest, DescribesTensorTimeAndTheRest) {
  const MetricMeaning tensor = DescribeMetric("sm__ops_path_tensor_src_bf16_dst_fp32.sum");
  EXPECT_EQ(tensor.category, MetricCategory::kTensorFlops);
  EXPECT_EQ(tensor.precision, "bf16_dst_fp32");
  EXPECT_DOUBLE_EQ(tensor.flops_per_count, 1);
  EXPECT_EQ(DescribeMetric("sm__inst_executed_pipe_tensor_op_gmma.sum").category,
            MetricCategory::kTensorInstructions);
  EXPECT_EQ(DescribeMetric("sm__inst_executed_pipe_fp64_op_dmma.sum").category,
            MetricCategory::kTensorInstructions);
  EXPECT_DOUBLE_EQ(DescribeMetric("sm__inst_executed_pipe_tensor_op_gmma.sum").flops_per_count, 0);
  EXPECT_EQ(DescribeMetric("gpu__time_duration.sum").unit, "ns");
  EXPECT_EQ(DescribeMetric("gpu__time_duration.sum").category, MetricCategory::kTime);
  EXPECT_EQ(DescribeMetric("dram__bytes.sum").category, MetricCategory::kMemory);
  const MetricMeaning other = DescribeMetric("lts__t_bytes.sum");
  EXPECT_EQ(other.category, MetricCategory::kOther);
  EXPECT_STREQ(MetricCategoryName(other.category), "other");
  EXPECT_STREQ(MetricCategoryName(MetricCategory::kTensorFlops), "tensor-flops");
}

}  // namespace
}  // namespace flopscope::counters
