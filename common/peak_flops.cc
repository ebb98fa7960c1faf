#include "common/peak_flops.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace flopscope {
namespace {

// NaN marks a precision the datasheet does not give (or the part does not have).
constexpr double kNone = NAN;

struct PeakRow {
  const char* model;
  // Every one of these must occur in the lower-cased device name; none of `unless`.
  const char* needles[3];
  const char* unless;
  double fp64, fp32, tf32, bf16, fp16, fp8;
};

// Dense tensor-core figures: datasheets quote tensor TFLOPS "with sparsity" (2:4), twice the
// dense rate, so those are halved here. fp64 is the higher of the CUDA-core and the fp64
// tensor-core figure (DGEMM runs on the tensor cores where a part has them); fp32 is the CUDA-core
// figure. Rows are tried in order, so the more specific come first: "h100 nvl" and "h100 pcie"
// before plain "h100" (SXM), "gh200" before "h200", "max-q" before the other RTX PRO 6000s.
// Sources (NVIDIA): each row names its datasheet or page; "whitepaper" rows use the architecture
// whitepaper's unrounded figures, which the datasheet rounds.
constexpr PeakRow kPeaks[] = {
    // Tesla V100 datasheet (PCIe, SXM2 and V100S PCIe columns): fp64 / fp32 / tensor.
    {"V100S PCIe", {"v100s", nullptr, nullptr}, nullptr, 8.2, 16.4, kNone, kNone, 130, kNone},
    {"V100 SXM2", {"v100", "sxm", nullptr}, nullptr, 7.8, 15.7, kNone, kNone, 125, kNone},
    {"V100 PCIe", {"v100", nullptr, nullptr}, nullptr, 7, 14, kNone, kNone, 112, kNone},
    // A100 datasheet (40 GB and 80 GB, PCIe and SXM alike): FP64 tensor core 19.5, TF32 312*,
    // BF16 / FP16 624*.
    {"A100", {"a100", nullptr, nullptr}, nullptr, 19.5, 19.5, 156, 312, 312, kNone},
    // H100 datasheet, H100 NVL column (per GPU): FP64 tensor core 60, FP32 60, TF32 835*,
    // BF16 / FP16 1,671*, FP8 3,341*.
    {"H100 NVL", {"h100", "nvl", nullptr}, nullptr, 60, 60, 417.5, 835.5, 835.5, 1670.5},
    // Hopper whitepaper, H100 PCIe: FP64 tensor 51.2, FP32 51.2, TF32 378 / 756*, FP16 756 /
    // 1513*, FP8 1513 / 3026* (datasheet: 51, 51, 756*, 1,513*, 3,026*).
    {"H100 PCIe", {"h100", "pcie", nullptr}, nullptr, 51.2, 51.2, 378, 756, 756, 1513},
    // Hopper whitepaper, H100 SXM5: FP64 tensor 66.9, FP32 66.9, TF32 494.7, FP16 989.4, FP8
    // 1978.9 (datasheet: 67, 67, 989*, 1,979*, 3,958*).
    {"H100 SXM", {"h100", nullptr, nullptr}, nullptr, 66.9, 66.9, 494.7, 989.4, 989.4, 1978.9},
    // GH200 datasheet (its Hopper GPU): the H100 SXM rates (FP64 tensor 67, TF32 989*,
    // FP16 1,979*, FP8 3,958*).
    {"GH200", {"gh200", nullptr, nullptr}, nullptr, 66.9, 66.9, 494.7, 989.4, 989.4, 1978.9},
    // H200 datasheet, H200 NVL column: as the H100 NVL (60, 60, 835*, 1,671*, 3,341*).
    {"H200 NVL", {"h200", "nvl", nullptr}, nullptr, 60, 60, 417.5, 835.5, 835.5, 1670.5},
    // H200 datasheet, H200 SXM column: as the H100 SXM (67, 67, 989*, 1,979*, 3,958*).
    {"H200 SXM", {"h200", nullptr, nullptr}, nullptr, 66.9, 66.9, 494.7, 989.4, 989.4, 1978.9},
    // GB200 NVL72 page, per Blackwell GPU: FP64 / FP64 tensor 40, FP32 80, TF32 2.5 PF*,
    // FP16 / BF16 5 PF*, FP8 10 PF*.
    {"GB200", {"gb200", nullptr, nullptr}, nullptr, 40, 80, 1250, 2500, 2500, 5000},
    // HGX B200 page, per GPU: FP64 / FP64 tensor 37, FP32 75, TF32 2.2 PF*, FP16 / BF16
    // 4.5 PF*, FP8 9 PF*.
    {"B200", {"b200", nullptr, nullptr}, "gb200", 37, 75, 1100, 2250, 2250, 4500},
    // RTX 6000 Ada datasheet: FP32 91.1, tensor 1,457* (FP8); Ada whitepaper: TF32 182.1,
    // FP16 / BF16 364.2 (with FP32 accumulate). No fp64 rate quoted.
    {"RTX 6000 Ada", {"rtx", "6000", "ada"}, nullptr, kNone, 91.1, 182.1, 364.2, 364.2, 728.5},
    // L40S / L40 datasheet: L40S FP32 91.6, TF32 183 | 366*, BF16 / FP16 362.05 | 733*,
    // FP8 733 | 1,466*; L40 90.5, 90.5 | 181*, 181.05 | 362.1*, 362 | 724*.
    {"L40S", {"l40s", nullptr, nullptr}, nullptr, kNone, 91.6, 183, 362.05, 362.05, 733},
    {"L40", {"l40", nullptr, nullptr}, nullptr, kNone, 90.5, 90.5, 181.05, 181.05, 362},
    // L4 datasheet: FP32 30.3, TF32 120*, BF16 / FP16 242*, FP8 485*.
    {"L4", {"l4", nullptr, nullptr}, "l40", kNone, 30.3, 60, 121, 121, 242.5},
    // RTX PRO 6000 Blackwell Max-Q datasheet: FP32 110 TFLOPS, at a lower clock than the
    // Workstation Edition: its tensor rates below are the Workstation Edition's scaled by
    // 110 / 125 (the same SMs at the clock the FP32 figure implies).
    {"RTX PRO 6000 Blackwell Max-Q",
     {"rtx pro 6000", "max-q", nullptr},
     nullptr,
     kNone,
     110,
     220,
     440,
     440,
     880},
    // RTX PRO 6000 Blackwell Workstation Edition datasheet: FP32 125 TFLOPS, 4,000 AI TOPS
    // (FP4, with sparsity): FP8 1,000, FP16 / BF16 500, TF32 250 dense. The Server Edition is
    // matched here too.
    {"RTX PRO 6000 Blackwell",
     {"rtx pro 6000", "blackwell", nullptr},
     nullptr,
     kNone,
     125,
     250,
     500,
     500,
     1000},
};

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool Matches(const PeakRow& row, const std::string& name) {
  for (const char* needle : row.needles) {
    if (needle != nullptr && name.find(needle) == std::string::npos) return false;
  }
  return row.unless == nullptr || name.find(row.unless) == std::string::npos;
}

double PeakOf(const PeakRow& row, Precision precision) {
  switch (precision) {
    case Precision::kFp64:
      return row.fp64;
    case Precision::kFp32:
      return row.fp32;
    case Precision::kTf32:
      return row.tf32;
    case Precision::kBf16:
      return row.bf16;
    case Precision::kFp16:
      return row.fp16;
    case Precision::kFp8:
      return row.fp8;
  }
  return kNone;
}

}  // namespace

std::optional<Precision> ParsePrecision(const std::string& text) {
  const std::string lower = Lower(text);
  if (lower == "fp64") return Precision::kFp64;
  if (lower == "fp32") return Precision::kFp32;
  if (lower == "tf32") return Precision::kTf32;
  if (lower == "bf16") return Precision::kBf16;
  if (lower == "fp16" || lower == "half") return Precision::kFp16;
  if (lower == "fp8") return Precision::kFp8;
  return std::nullopt;
}

std::optional<Precision> PeakPrecisionOfCounted(std::string_view counted_precision) {
  constexpr std::string_view kTensorPrefix = "tensor:";
  std::string_view name = counted_precision;
  if (name.substr(0, kTensorPrefix.size()) == kTensorPrefix) {
    // A tensor source names its input type, then maybe the accumulator: "bf16_dst_fp32".
    name.remove_prefix(kTensorPrefix.size());
    name = name.substr(0, name.find("_dst"));
    // Sources of several input types list them narrowest first ("fp4_fp6_fp8"): the widest
    // decides, as it bounds the peak from below.
    if (const size_t last = name.rfind('_'); last != std::string_view::npos) {
      name = name.substr(last + 1);
    }
  }
  return ParsePrecision(std::string(name));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp64:
      return "fp64";
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

PeakLookup LookUpPeak(const std::string& device_name, Precision precision) {
  PeakLookup lookup;
  if (device_name.empty()) {
    lookup.problem = "device unknown (no GPU recorded); pass --peak-tflops";
    return lookup;
  }
  const std::string name = Lower(device_name);
  for (const PeakRow& row : kPeaks) {
    if (!Matches(row, name)) continue;
    lookup.device_model = row.model;
    const double peak = PeakOf(row, precision);
    if (std::isnan(peak)) {
      lookup.problem = std::string("no ") + PrecisionName(precision) + " peak for " + row.model +
                       "; pass --peak-tflops";
    } else {
      lookup.tflops = peak;
    }
    return lookup;
  }
  lookup.problem = "no peak known for '" + device_name + "'; pass --peak-tflops";
  return lookup;
}

std::vector<std::string> KnownPeakModels() {
  std::vector<std::string> models;
  for (const PeakRow& row : kPeaks) models.emplace_back(row.model);
  return models;
}

}  // namespace flopscope
