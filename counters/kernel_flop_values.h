#pragma once

#include <string>
#include <utility>
#include <vector>

namespace flopscope::counters {

// One kernel's counted FLOPs by precision, with the counter values they came from.
struct KernelFlopValues {
  double fp64 = 0;  // CUDA cores
  double fp32 = 0;  // CUDA cores (packed FP32 included)
  double fp16 = 0;  // CUDA cores, under kFp16Convention (common/flop_formulas.h)
  // Tensor-core FLOPs by source type ("fp16_dst_fp32" -> FLOPs), in metric order; a source
  // named twice is summed.
  std::vector<std::pair<std::string, double>> tensor;
  // Every (metric, value) given, FLOP counters or not, for audit.
  std::vector<std::pair<std::string, double>> raw;

  double total() const;
};

// FLOPs from evaluated counters: metrics[i] has value values[i] (extra entries of the longer
// list are ignored). CUDA-core counters go through common/flop_formulas (FMA twice, packed half
// and packed FP32 by lanes); tensor ops_path counters are FLOPs one for one; everything else is
// kept in `raw` only. A value that is not finite (CUPTI's NaN for an uncollected metric) counts
// no FLOPs but stays in `raw`.
KernelFlopValues FlopsFromCounters(const std::vector<std::string>& metrics,
                                   const std::vector<double>& values);

}  // namespace flopscope::counters
