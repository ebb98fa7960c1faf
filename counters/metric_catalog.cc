#include "counters/metric_catalog.h"

#include <array>
#include <span>

#include "common/flop_formulas.h"

namespace flopscope::counters {
namespace {

using Names = std::span<const std::string_view>;

// ---- The tables -------------------------------------------------------------------------------
// Where they come from: ../shared/docs/cupti.md §1.2 (the ops_path sets Nsight Compute 2025.x's
// tensor roofline uses per architecture) and §2 (names and chips accepted by CUDA 13.0's Profiler
// Host API, and the pass counts). Chips that doc does not cover (GA103..GA10B, AD103..AD107,
// GB102, GB10B, GB110, GB203..GB20B) were placed by the same acceptance probe against CUDA 13.0
// (every name below is accepted on every chip of its row; metric_planner_unittest checks this
// against the libcupti it runs with). Turing and Volta have no row: their ops_path names differ
// and CUDA 13 does not profile Volta.

// NT: thread-instruction counters, instrumented (SASS-patched): one pass of their own.
constexpr std::string_view kCudaCoreOps[] = {
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
};
// Packed FP32 (FADD2/FMUL2/FFMA2), Blackwell datacenter only.
constexpr std::string_view kPackedFp32Ops[] = {
    "sm__sass_thread_inst_executed_op_fadd2_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul2_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum",
};
// T: never costs a pass of its own (cupti.md §2, finding 3).
constexpr std::string_view kTiming[] = {
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.sum",
    "dram__bytes.sum",
};
// Integrated chips (the B suffix: Orin, ...) share system memory and have no dram__ unit.
constexpr std::string_view kTimingIntegrated[] = {
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.sum",
};

// TC: tensor FLOPs by source type (the floating-point sources only; integer ops are not FLOPs).
constexpr std::string_view kTensorAmpere[] = {
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",
};
constexpr std::string_view kTensorAda[] = {
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",          "sm__ops_path_tensor_src_fp8.sum",
};
// GH100 has no destination split for FP16 (src_fp16_dst_* is rejected there).
constexpr std::string_view kTensorHopper[] = {
    "sm__ops_path_tensor_src_fp16.sum",          "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_fp8.sum",
};
constexpr std::string_view kTensorBlackwell[] = {
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp16.sum",
    "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp4_dst_fp32.sum",
};
constexpr std::string_view kTensorBlackwellSplitFp8[] = {
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_fp8_dst_fp16.sum",
    "sm__ops_path_tensor_src_fp8_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp4_fp6_dst_fp16.sum",
    "sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp4_dst_fp32.sum",
};

// I: tensor (and FP64-pipe DMMA) warp-instruction counts.
constexpr std::string_view kInstGa100[] = {
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_dmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
};
constexpr std::string_view kInstGa10x[] = {
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_fp64_op_dmma.sum",
};
constexpr std::string_view kInstAd10x[] = {
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_hmma_v2.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_fp64_op_dmma.sum",
};
// On GH100 op_hmma also counts HGMMA/QGMMA; op_gmma counts every wgmma.
constexpr std::string_view kInstGh100[] = {
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_dmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
};
constexpr std::string_view kInstGb100[] = {
    "sm__inst_executed_pipe_tensor_subpipe_hmma.sum",
    "sm__inst_executed_pipe_tensor_subpipe_imma.sum",
    "sm__inst_executed_pipe_tensor_subpipe_dmma.sum",
};
constexpr std::string_view kInstGb20x[] = {
    "sm__inst_executed_pipe_tensor_subpipe_hmma.sum",
    "sm__inst_executed_pipe_tensor_subpipe_imma.sum",
    "sm__inst_executed_pipe_fp64_op_dmma.sum",
};

constexpr std::string_view kChipsGa100[] = {"GA100"};
constexpr std::string_view kChipsGa10x[] = {"GA102", "GA103", "GA104", "GA106", "GA107"};
constexpr std::string_view kChipsGa10b[] = {"GA10B"};
constexpr std::string_view kChipsAd10x[] = {"AD102", "AD103", "AD104", "AD106", "AD107"};
constexpr std::string_view kChipsGh100[] = {"GH100"};  // GH200 reports GH100
constexpr std::string_view kChipsGb10x[] = {"GB100", "GB102"};
constexpr std::string_view kChipsGb10b[] = {"GB10B"};
constexpr std::string_view kChipsGb110[] = {"GB110"};
constexpr std::string_view kChipsGb20x[] = {"GB202", "GB203", "GB205", "GB206", "GB207"};
constexpr std::string_view kChipsGb20b[] = {"GB20B"};

struct Family {
  std::string_view name;
  Names chips;
  bool packed_fp32;
  Names tensor_ops;
  Names tensor_instructions;
  Names timing;
};

constexpr Family kFamilies[] = {
    {"GA100", kChipsGa100, false, kTensorAmpere, kInstGa100, kTiming},
    {"GA10x", kChipsGa10x, false, kTensorAmpere, kInstGa10x, kTiming},
    {"GA10B", kChipsGa10b, false, kTensorAmpere, kInstGa10x, kTimingIntegrated},
    {"AD10x", kChipsAd10x, false, kTensorAda, kInstAd10x, kTiming},
    {"GH100", kChipsGh100, false, kTensorHopper, kInstGh100, kTiming},
    {"GB10x", kChipsGb10x, true, kTensorBlackwell, kInstGb100, kTiming},
    // Acceptance-probed only: no Nsight Compute section names GB10B or GB110.
    {"GB10B", kChipsGb10b, false, kTensorBlackwell, kInstGb20x, kTimingIntegrated},
    {"GB110", kChipsGb110, true, kTensorBlackwellSplitFp8, kInstGb20x, kTiming},
    {"GB20x", kChipsGb20x, false, kTensorBlackwellSplitFp8, kInstGb20x, kTiming},
    {"GB20B", kChipsGb20b, false, kTensorBlackwellSplitFp8, kInstGb20x, kTimingIntegrated},
};

// ---- Lookups ------------------------------------------------------------------------------------

const Family* FindFamily(std::string_view chip) {
  for (const Family& family : kFamilies) {
    for (std::string_view member : family.chips) {
      if (member == chip) return &family;
    }
  }
  return nullptr;
}

void Append(Names names, std::vector<std::string>* out) {
  for (std::string_view name : names) out->emplace_back(name);
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool DescribeCudaCore(std::string_view metric, MetricMeaning* meaning) {
  CudaCoreInstructions one;
  if (!AccumulateInstructionCounter(metric, 1, &one)) return false;
  // The weight comes from the formulas themselves, so the listing cannot drift from them.
  const CudaCoreFlops flops = CudaCoreFlopsFrom(one);
  meaning->category = MetricCategory::kCudaCoreFlops;
  meaning->precision = flops.fp64 > 0 ? "fp64" : flops.fp32 > 0 ? "fp32" : "fp16";
  meaning->flops_per_count = flops.fp64 + flops.fp32 + flops.fp16;
  meaning->unit = "instruction";
  return true;
}

}  // namespace

bool ParseMetricSetKind(std::string_view text, MetricSetKind* out) {
  if (text == "full") {
    *out = MetricSetKind::kFull;
  } else if (text == "cheap") {
    *out = MetricSetKind::kCheap;
  } else {
    return false;
  }
  return true;
}

const char* MetricSetName(MetricSetKind kind) {
  return kind == MetricSetKind::kFull ? "full" : "cheap";
}

bool CandidateMetrics(std::string_view chip, MetricSetKind kind, std::vector<std::string>* out) {
  out->clear();
  const Family* family = FindFamily(chip);
  if (family == nullptr) return false;
  Append(kCudaCoreOps, out);
  if (family->packed_fp32) Append(kPackedFp32Ops, out);
  if (kind == MetricSetKind::kFull) Append(family->tensor_ops, out);
  Append(family->tensor_instructions, out);
  Append(family->timing, out);
  return true;
}

std::string_view MetricFamilyOf(std::string_view chip) {
  const Family* family = FindFamily(chip);
  return family != nullptr ? family->name : std::string_view();
}

std::vector<std::string> ChipsWithMetricFamily() {
  std::vector<std::string> chips;
  for (const Family& family : kFamilies) Append(family.chips, &chips);
  return chips;
}

const char* MetricCategoryName(MetricCategory category) {
  switch (category) {
    case MetricCategory::kCudaCoreFlops:
      return "cuda-core-flops";
    case MetricCategory::kTensorFlops:
      return "tensor-flops";
    case MetricCategory::kTensorInstructions:
      return "tensor-instructions";
    case MetricCategory::kTime:
      return "time";
    case MetricCategory::kMemory:
      return "memory";
    case MetricCategory::kOther:
      break;
  }
  return "other";
}

MetricMeaning DescribeMetric(std::string_view metric) {
  MetricMeaning meaning;
  if (DescribeCudaCore(metric, &meaning)) return meaning;
  if (std::string source = TensorSourceOfMetric(metric); !source.empty()) {
    meaning.category = MetricCategory::kTensorFlops;
    meaning.precision = std::move(source);
    meaning.flops_per_count = 1;  // math_op: 2 per MAC (cupti.md §1.2)
    meaning.unit = "math_op";
  } else if (StartsWith(metric, "sm__inst_executed_pipe_tensor") ||
             StartsWith(metric, "sm__inst_executed_pipe_fp64_op_dmma")) {
    meaning.category = MetricCategory::kTensorInstructions;
    meaning.unit = "instruction";
  } else if (metric == "gpu__time_duration.sum") {
    meaning.category = MetricCategory::kTime;
    meaning.unit = "ns";
  } else if (metric == "sm__cycles_elapsed.sum") {
    meaning.category = MetricCategory::kTime;
    meaning.unit = "cycle";
  } else if (metric == "dram__bytes.sum") {
    meaning.category = MetricCategory::kMemory;
    meaning.unit = "byte";
  }
  return meaning;
}

}  // namespace flopscope::counters
