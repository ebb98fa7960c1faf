#include "common/flop_formulas.h"

#include <gtest/gtest.h>

namespace flopscope {
namespace {

TEST(FlopFormulasTest, FmaCountsTwiceAndPackedHalfFourTimes) {
  CudaCoreInstructions n;
  n.dadd = 1;
  n.dmul = 2;
  n.dfma = 3;
  n.fadd = 10;
  n.fmul = 20;
  n.ffma = 30;
  n.hadd = 100;
  n.hmul = 200;
  n.hfma = 300;
  const CudaCoreFlops flops = CudaCoreFlopsFrom(n);
  EXPECT_DOUBLE_EQ(flops.fp64, 1 + 2 + 2 * 3);
  EXPECT_DOUBLE_EQ(flops.fp32, 10 + 20 + 2 * 30);
  EXPECT_DOUBLE_EQ(flops.fp16, 2 * 100 + 2 * 200 + 4 * 300);
}

TEST(FlopFormulasTest, PackedFp32CountsTwoLanesPerInstruction) {
  CudaCoreInstructions n;
  n.fadd = 1;
  n.fadd2 = 10;
  n.fmul2 = 100;
  n.ffma2 = 1000;
  // FADD2 and FMUL2 do two operations, FFMA2 two fused multiply-adds (cupti.md §1.1).
  EXPECT_DOUBLE_EQ(CudaCoreFlopsFrom(n).fp32, 1 + 2 * 10 + 2 * 100 + 4 * 1000);
  EXPECT_DOUBLE_EQ(CudaCoreFlopsFrom(n).fp16, 0);
  EXPECT_DOUBLE_EQ(CudaCoreFlopsFrom(n).fp64, 0);
}

TEST(FlopFormulasTest, RecognisesGb100PackedCounters) {
  CudaCoreInstructions n;
  EXPECT_TRUE(
      AccumulateInstructionCounter("sm__sass_thread_inst_executed_op_fadd2_pred_on.sum", 3, &n));
  EXPECT_TRUE(
      AccumulateInstructionCounter("sm__sass_thread_inst_executed_op_fmul2_pred_on.sum", 5, &n));
  EXPECT_TRUE(
      AccumulateInstructionCounter("sm__sass_thread_inst_executed_op_ffma2_pred_on.sum", 7, &n));
  EXPECT_TRUE(
      AccumulateInstructionCounter("smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum", 1, &n));
  EXPECT_DOUBLE_EQ(n.fadd2, 3);
  EXPECT_DOUBLE_EQ(n.fmul2, 5);
  EXPECT_DOUBLE_EQ(n.ffma2, 8);
  EXPECT_DOUBLE_EQ(n.ffma, 0);  // the scalar counter is a different field
  // The pre-combined packed sum is an instruction count that does not weigh FFMA2 more.
  EXPECT_FALSE(AccumulateInstructionCounter(
      "sm__sass_thread_inst_executed_ops_fadd2_fmul2_ffma2_pred_on.sum", 1, &n));
  EXPECT_DOUBLE_EQ(n.fadd2 + n.fmul2 + n.ffma2, 16);
}

TEST(FlopFormulasTest, RecognisesBothCounterPrefixes) {
  CudaCoreInstructions n;
  EXPECT_TRUE(
      AccumulateInstructionCounter("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 5, &n));
  EXPECT_TRUE(
      AccumulateInstructionCounter("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 7, &n));
  EXPECT_TRUE(
      AccumulateInstructionCounter("smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 2, &n));
  EXPECT_DOUBLE_EQ(n.ffma, 12);
  EXPECT_DOUBLE_EQ(n.hmul, 2);
}

TEST(FlopFormulasTest, IgnoresOtherMetrics) {
  CudaCoreInstructions n;
  for (const char* metric :
       {"sm__sass_thread_inst_executed_ops_fadd_fmul_ffma_pred_on.sum",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.avg", "gpu__time_duration.sum",
        "sm__sass_thread_inst_executed_op_qfma_pred_on.sum", ""}) {
    EXPECT_FALSE(AccumulateInstructionCounter(metric, 1, &n)) << metric;
  }
  EXPECT_DOUBLE_EQ(CudaCoreFlopsFrom(n).fp32, 0);
}

TEST(FlopFormulasTest, TensorSourcesAreFloatingPointOpsPaths) {
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_src_fp16_dst_fp32.sum"), "fp16_dst_fp32");
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_src_fp8.sum"), "fp8");
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_src_int8.sum"), "");
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_on.sum"), "");
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_op_hgmma_src_fp16.sum"), "");
  EXPECT_EQ(TensorSourceOfMetric("sm__ops_path_tensor_src_fp16.sum.per_second"), "");
}

}  // namespace
}  // namespace flopscope
