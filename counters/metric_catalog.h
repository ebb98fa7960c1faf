#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flopscope::counters {

// Which counters to collect on which chip (../shared/docs/cupti.md §1–2).
//
// FULL: CUDA-core instruction counters (FP64/FP32/FP16 FLOPs), the chip's tensor-core ops_path
//   set (tensor FLOPs by source type), its tensor instruction counts and timing. 6 kernel-replay
//   passes on most chips, 10 on GB20x.
// CHEAP: the same without the ops_path set: CUDA-core FLOPs, instruction counts and timing in 2
//   passes. Tensor work is then seen only as instruction counts, not as FLOPs.
enum class MetricSetKind { kFull, kCheap };

// "full" / "cheap" (exactly). False, `out` untouched, for anything else.
bool ParseMetricSetKind(std::string_view text, MetricSetKind* out);
const char* MetricSetName(MetricSetKind kind);

// The candidate metrics of `kind` for `chip` (a name from cuptiDeviceGetChipName or
// cuptiProfilerHostGetSupportedChips, e.g. "GH100"), in collection order. False, `out` cleared,
// for a chip with no family entry (older chips, chips newer than this table): the caller
// collects timing only. Candidates still need validating on the chip (MetricPlanner does it).
bool CandidateMetrics(std::string_view chip, MetricSetKind kind, std::vector<std::string>* out);

// The family `chip` belongs to ("GA10x" for "GA104"), or "" for none.
std::string_view MetricFamilyOf(std::string_view chip);

// Every chip name that has a family entry, in table order.
std::vector<std::string> ChipsWithMetricFamily();

// What a metric measures, for listings and audits.
enum class MetricCategory {
  kCudaCoreFlops,       // a thread-instruction counter that becomes FP64/FP32/FP16 FLOPs
  kTensorFlops,         // tensor-core math ops, 1 op = 1 FLOP, by source type
  kTensorInstructions,  // tensor (or DMMA) warp instructions: not FLOPs, a cross-check
  kTime,                // GPU duration or elapsed cycles
  kMemory,              // bytes moved
  kOther,
};
const char* MetricCategoryName(MetricCategory category);  // "cuda-core-flops", ...

struct MetricMeaning {
  MetricCategory category = MetricCategory::kOther;
  // "fp64" / "fp32" / "fp16" for CUDA-core counters, the source ("fp16_dst_fp32") for tensor
  // FLOPs, "" otherwise.
  std::string precision;
  double flops_per_count = 0;  // FLOPs one unit of the metric stands for (0: not FLOPs)
  std::string unit;            // "instruction", "math_op", "ns", "cycle", "byte", ""
};
MetricMeaning DescribeMetric(std::string_view metric);

}  // namespace flopscope::counters
