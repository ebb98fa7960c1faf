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

// Dense tensor-core figures (datasheets quote "with sparsity" numbers twice as high); fp64 and
// fp32 are the CUDA-core (or fp64 tensor-core, where higher) figures. More specific rows come
// first: "h100 nvl" and "h100 pcie" before plain "h100" (SXM).
constexpr PeakRow kPeaks[] = {
    {"V100 SXM2", {"v100", "sxm", nullptr}, nullptr, 7.8, 15.7, kNone, kNone, 125, kNone},
    {"V100 PCIe", {"v100", nullptr, nullptr}, nullptr, 7, 14, kNone, kNone, 112, kNone},
    {"A100", {"a100", nullptr, nullptr}, nullptr, 19.5, 19.5, 156, 312, 312, kNone},
    {"H100 NVL", {"h100", "nvl", nullptr}, nullptr, 30, 60, 417.5, 835, 835, 1670},
    {"H100 PCIe", {"h100", "pcie", nullptr}, nullptr, 25.6, 51.2, 378, 756, 756, 1513},
    {"H100 SXM", {"h100", nullptr, nullptr}, nullptr, 33.5, 66.9, 494.7, 989.4, 989.4, 1978.9},
    {"H200 NVL", {"h200", "nvl", nullptr}, nullptr, 30, 60, 417.5, 835, 835, 1670},
    {"H200 SXM", {"h200", nullptr, nullptr}, nullptr, 33.5, 66.9, 494.7, 989.4, 989.4, 1978.9},
    {"B200", {"b200", nullptr, nullptr}, "gb200", 40, 80, 1100, 2250, 2250, 4500},
    {"RTX 6000 Ada", {"rtx", "6000", "ada"}, nullptr, kNone, 91.1, 182.1, 364.2, 364.2, 728.5},
    {"L40S", {"l40s", nullptr, nullptr}, nullptr, kNone, 91.6, 183, 362, 362, 733},
    {"L40", {"l40", nullptr, nullptr}, nullptr, kNone, 90.5, 90.5, 181, 181, 362},
    {"L4", {"l4", nullptr, nullptr}, "l40", kNone, 30.3, 60, 121, 121, 242},
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
