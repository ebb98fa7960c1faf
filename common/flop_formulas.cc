#include "common/flop_formulas.h"

namespace flopscope {
namespace {

constexpr std::string_view kInstructionSuffix = "_pred_on.sum";
constexpr std::string_view kTensorPrefix = "sm__ops_path_tensor_src_";
constexpr std::string_view kSumSuffix = ".sum";

// "dfma" for "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", else "".
std::string_view InstructionOp(std::string_view metric) {
  for (std::string_view prefix :
       {"sm__sass_thread_inst_executed_op_", "smsp__sass_thread_inst_executed_op_"}) {
    if (metric.size() > prefix.size() + kInstructionSuffix.size() &&
        metric.substr(0, prefix.size()) == prefix &&
        metric.substr(metric.size() - kInstructionSuffix.size()) == kInstructionSuffix) {
      return metric.substr(prefix.size(),
                           metric.size() - prefix.size() - kInstructionSuffix.size());
    }
  }
  return {};
}

}  // namespace

CudaCoreFlops CudaCoreFlopsFrom(const CudaCoreInstructions& n) {
  CudaCoreFlops flops;
  flops.fp64 = n.dadd + n.dmul + 2 * n.dfma;
  // The packed weights are the lane-consistent ones (cupti.md §1.1): NCU 2025.4's rule line for
  // them lacks a x2 on FMUL2 and weighs FFMA2 inconsistently, so it is not followed.
  flops.fp32 = n.fadd + n.fmul + 2 * n.ffma + 2 * n.fadd2 + 2 * n.fmul2 + 4 * n.ffma2;
  flops.fp16 = 2 * n.hadd + 2 * n.hmul + 4 * n.hfma;  // kFp16Convention
  return flops;
}

bool AccumulateInstructionCounter(std::string_view metric, double value,
                                  CudaCoreInstructions* counts) {
  const std::string_view op = InstructionOp(metric);
  double* field = nullptr;
  if (op == "dadd")
    field = &counts->dadd;
  else if (op == "dmul")
    field = &counts->dmul;
  else if (op == "dfma")
    field = &counts->dfma;
  else if (op == "fadd")
    field = &counts->fadd;
  else if (op == "fmul")
    field = &counts->fmul;
  else if (op == "ffma")
    field = &counts->ffma;
  else if (op == "hadd")
    field = &counts->hadd;
  else if (op == "hmul")
    field = &counts->hmul;
  else if (op == "hfma")
    field = &counts->hfma;
  else if (op == "fadd2")
    field = &counts->fadd2;
  else if (op == "fmul2")
    field = &counts->fmul2;
  else if (op == "ffma2")
    field = &counts->ffma2;
  if (field == nullptr) return false;
  *field += value;
  return true;
}

std::string TensorSourceOfMetric(std::string_view metric) {
  if (metric.size() <= kTensorPrefix.size() + kSumSuffix.size() ||
      metric.substr(0, kTensorPrefix.size()) != kTensorPrefix ||
      metric.substr(metric.size() - kSumSuffix.size()) != kSumSuffix) {
    return "";
  }
  const std::string_view source =
      metric.substr(kTensorPrefix.size(), metric.size() - kTensorPrefix.size() - kSumSuffix.size());
  if (source.find("sparsity") != std::string_view::npos) return "";
  if (source.substr(0, 3) == "int") return "";
  if (source.find('.') != std::string_view::npos) return "";  // a rate such as .per_second
  return std::string(source);
}

}  // namespace flopscope
