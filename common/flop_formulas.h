#pragma once

#include <string>
#include <string_view>

namespace flopscope {

// FLOPs from hardware counters, in ONE place for the injector and the importer
// (docs: ../shared/docs/cupti.md §1). Dependency-free: the injector core links this.
//
// CUDA-core counters are thread-instruction counts (`sm__sass_thread_inst_executed_op_X_pred_on`),
// so an FMA must be doubled here; they never give FLOPs by themselves.
struct CudaCoreInstructions {
  double dadd = 0, dmul = 0, dfma = 0;
  double fadd = 0, fmul = 0, ffma = 0;
  double hadd = 0, hmul = 0, hfma = 0;
  // Packed FP32 (FADD2/FMUL2/FFMA2, two lanes per thread instruction): GB100's `op_{fadd2,fmul2,
  // ffma2}` counters; no other chip defines them (cupti.md §2), so they stay 0 elsewhere.
  double fadd2 = 0, fmul2 = 0, ffma2 = 0;
};

struct CudaCoreFlops {
  double fp64 = 0;
  double fp32 = 0;
  double fp16 = 0;
};

// The half-precision convention, stated wherever FP16 figures are shown or stored. Current Nsight
// Compute counts every H* thread instruction as a packed pair (HFMA2 = 4 FLOP); the counter cannot
// tell packed from scalar, so scalar FP16 code is over-counted 2x under this convention.
inline constexpr char kFp16Convention[] =
    "ncu-packed-half: fp16 = 2*hadd + 2*hmul + 4*hfma (scalar half over-counted 2x)";

//   FP64 = dadd + dmul + 2*dfma
//   FP32 = fadd + fmul + 2*ffma + 2*fadd2 + 2*fmul2 + 4*ffma2   (packed: 2 lanes each)
//   FP16 = 2*hadd + 2*hmul + 4*hfma   (kFp16Convention)
CudaCoreFlops CudaCoreFlopsFrom(const CudaCoreInstructions& counts);

// Adds `value` to the field of `counts` that `metric` names, when it is one of the nine
// `{sm,smsp}__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum` counters or GB100's
// packed `..._op_{fadd2,fmul2,ffma2}_pred_on.sum`; returns
// false (and changes nothing) for any other metric. The pre-combined `..._ops_..._pred_on`
// instruction sums are deliberately not accepted: they do not weigh FMA twice.
bool AccumulateInstructionCounter(std::string_view metric, double value,
                                  CudaCoreInstructions* counts);

// Tensor-core math ops are FLOPs one for one (`sm__ops_path_tensor_src_<source>.sum`, unit
// math_op, 2 per MAC). Returns "<source>" (e.g. "fp16_dst_fp32") for such a metric, or "" for
// anything else: per-family breakdowns (`..._op_hgmma_...`), sparsity splits and integer sources
// are not FLOPs or would count the same work twice.
std::string TensorSourceOfMetric(std::string_view metric);

}  // namespace flopscope
