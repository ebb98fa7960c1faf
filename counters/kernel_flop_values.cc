#include "counters/kernel_flop_values.h"

#include <algorithm>
#include <cmath>

#include "common/flop_formulas.h"

namespace flopscope::counters {
namespace {

void AddTensor(const std::string& source, double flops,
               std::vector<std::pair<std::string, double>>* tensor) {
  for (auto& [known, sum] : *tensor) {
    if (known == source) {
      sum += flops;
      return;
    }
  }
  tensor->emplace_back(source, flops);
}

}  // namespace

double KernelFlopValues::total() const {
  double sum = fp64 + fp32 + fp16;
  for (const auto& [source, flops] : tensor) sum += flops;
  return sum;
}

KernelFlopValues FlopsFromCounters(const std::vector<std::string>& metrics,
                                   const std::vector<double>& values) {
  KernelFlopValues result;
  CudaCoreInstructions instructions;
  const size_t count = std::min(metrics.size(), values.size());
  result.raw.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string& metric = metrics[i];
    const double value = values[i];
    result.raw.emplace_back(metric, value);
    if (!std::isfinite(value)) continue;
    if (AccumulateInstructionCounter(metric, value, &instructions)) continue;
    if (std::string source = TensorSourceOfMetric(metric); !source.empty()) {
      AddTensor(source, value, &result.tensor);
    }
  }
  const CudaCoreFlops cuda_core = CudaCoreFlopsFrom(instructions);
  result.fp64 = cuda_core.fp64;
  result.fp32 = cuda_core.fp32;
  result.fp16 = cuda_core.fp16;
  return result;
}

}  // namespace flopscope::counters
