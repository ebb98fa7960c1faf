#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flopscope {

// Dense (no structured sparsity) peak throughput of NVIDIA data-center and workstation GPUs, in
// TFLOPS, by precision, from the vendors' datasheets. The MFU of a report is measured FLOPS over
// the peak of the dominant precision. Dependency-free (common/ is linked by the injector too).
enum class Precision { kFp64, kFp32, kTf32, kBf16, kFp16, kFp8 };

// "fp64", "fp32", "tf32", "bf16", "fp16", "fp8" (case-insensitive; "half" = fp16); nullopt else.
std::optional<Precision> ParsePrecision(const std::string& text);
const char* PrecisionName(Precision precision);

// The peak a counted precision is measured against: "fp64", "fp32", "fp16" (CUDA cores) as
// themselves; a tensor source "tensor:<source>" by its input type ("tensor:bf16_dst_fp32" ->
// bf16; "tensor:fp4_fp6_fp8" -> the widest, fp8, which bounds the peak from below). nullopt for
// a source without a peak (integer types).
std::optional<Precision> PeakPrecisionOfCounted(std::string_view counted_precision);

struct PeakLookup {
  std::optional<double> tflops;  // set when the device and precision are in the table
  std::string device_model;      // the table row matched ("H100 SXM"), empty when none
  std::string problem;           // why there is no peak, when there is none
};

// Matches a CUDA device name ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB",
// "NVIDIA RTX 6000 Ada Generation") to a table row, case-insensitively, most specific row first.
PeakLookup LookUpPeak(const std::string& device_name, Precision precision);

// The table's model names, for help texts and docs.
std::vector<std::string> KnownPeakModels();

}  // namespace flopscope
