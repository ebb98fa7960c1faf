#include "common/peak_flops.h"

#include "gtest/gtest.h"

namespace flopscope {
namespace {

double Peak(const std::string& name, Precision precision) {
  return LookUpPeak(name, precision).tflops.value_or(-1);
}

TEST(PeakFlopsTest, TellsTheFormFactorsApartByTheCudaDeviceName) {
  EXPECT_EQ(LookUpPeak("NVIDIA H100 80GB HBM3", Precision::kBf16).device_model, "H100 SXM");
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 80GB HBM3", Precision::kBf16), 989.4);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 PCIe", Precision::kBf16), 756);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 NVL", Precision::kFp8), 1670.5);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 NVL", Precision::kBf16), 835.5);
  EXPECT_EQ(LookUpPeak("NVIDIA H200", Precision::kBf16).device_model, "H200 SXM");
  EXPECT_EQ(LookUpPeak("NVIDIA H200 NVL", Precision::kBf16).device_model, "H200 NVL");
  EXPECT_DOUBLE_EQ(Peak("NVIDIA A100-SXM4-80GB", Precision::kFp16), 312);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA A100-SXM4-80GB", Precision::kTf32), 156);
  EXPECT_DOUBLE_EQ(Peak("Tesla V100-SXM2-16GB", Precision::kFp16), 125);
  EXPECT_DOUBLE_EQ(Peak("Tesla V100-PCIE-16GB", Precision::kFp16), 112);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA B200", Precision::kBf16), 2250);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA B200", Precision::kFp32), 75);
  EXPECT_EQ(LookUpPeak("NVIDIA GB200", Precision::kBf16).device_model, "GB200");
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GB200", Precision::kFp8), 5000);
  EXPECT_EQ(LookUpPeak("NVIDIA GH200 480GB", Precision::kBf16).device_model, "GH200");
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GH200 480GB", Precision::kBf16), 989.4);
  EXPECT_DOUBLE_EQ(Peak("Tesla V100S-PCIE-32GB", Precision::kFp16), 130);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA L40S", Precision::kBf16), 362.05);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA L4", Precision::kFp8), 242.5);
  EXPECT_EQ(LookUpPeak("NVIDIA RTX 6000 Ada Generation", Precision::kBf16).device_model,
            "RTX 6000 Ada");
  EXPECT_EQ(LookUpPeak("NVIDIA L40S", Precision::kBf16).device_model, "L40S");
  EXPECT_EQ(LookUpPeak("NVIDIA L40", Precision::kBf16).device_model, "L40");
  EXPECT_EQ(LookUpPeak("NVIDIA L4", Precision::kBf16).device_model, "L4");
  EXPECT_EQ(LookUpPeak("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", Precision::kBf16)
                .device_model,
            "RTX PRO 6000 Blackwell");
  EXPECT_DOUBLE_EQ(Peak("NVIDIA RTX PRO 6000 Blackwell Server Edition", Precision::kFp8), 1000);
  EXPECT_DOUBLE_EQ(
      Peak("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", Precision::kBf16), 440);
}

TEST(PeakFlopsTest, Fp64IsTheTensorCoreRateWhereThePartHasOne) {
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 80GB HBM3", Precision::kFp64), 66.9);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 PCIe", Precision::kFp64), 51.2);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H200 NVL", Precision::kFp64), 60);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA A100-SXM4-80GB", Precision::kFp64), 19.5);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA B200", Precision::kFp64), 37);
  EXPECT_DOUBLE_EQ(Peak("Tesla V100-SXM2-16GB", Precision::kFp64), 7.8);  // no fp64 tensor cores
  EXPECT_FALSE(LookUpPeak("NVIDIA L40S", Precision::kFp64).tflops.has_value());
}

TEST(PeakFlopsTest, DenseTensorRatesAreHalfTheSparseOnes) {
  // Every row's fp16 tensor rate is twice its tf32 rate and half its fp8 rate, where both are
  // quoted (the datasheets' ratios; a typed-in sparse figure would break them).
  for (const std::string& model : KnownPeakModels()) {
    const std::string device = "NVIDIA " + model;
    EXPECT_EQ(LookUpPeak(device, Precision::kFp32).device_model, model);
    const double tf32 = Peak(device, Precision::kTf32);
    const double fp16 = Peak(device, Precision::kFp16);
    const double fp8 = Peak(device, Precision::kFp8);
    if (tf32 > 0 && fp16 > 0) {
      EXPECT_NEAR(fp16 / tf32, 2, 0.05) << model;
    }
    if (fp8 > 0 && fp16 > 0) {
      EXPECT_NEAR(fp8 / fp16, 2, 0.05) << model;
    }
  }
}

TEST(PeakFlopsTest, ExplainsWhyThereIsNoPeak) {
  const PeakLookup unknown = LookUpPeak("Some Future GPU", Precision::kBf16);
  EXPECT_FALSE(unknown.tflops.has_value());
  EXPECT_NE(unknown.problem.find("Some Future GPU"), std::string::npos);
  EXPECT_NE(unknown.problem.find("--peak-tflops"), std::string::npos);
  EXPECT_FALSE(LookUpPeak("", Precision::kBf16).tflops.has_value());
  const PeakLookup no_bf16 = LookUpPeak("Tesla V100-SXM2-16GB", Precision::kBf16);
  EXPECT_FALSE(no_bf16.tflops.has_value());
  EXPECT_EQ(no_bf16.device_model, "V100 SXM2");
  EXPECT_NE(no_bf16.problem.find("bf16"), std::string::npos);
}

TEST(PeakFlopsTest, ParsesPrecisionNames) {
  EXPECT_EQ(ParsePrecision("BF16"), Precision::kBf16);
  EXPECT_EQ(ParsePrecision("half"), Precision::kFp16);
  EXPECT_EQ(ParsePrecision("fp8"), Precision::kFp8);
  EXPECT_FALSE(ParsePrecision("int4").has_value());
  for (const char* name : {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8"}) {
    EXPECT_STREQ(PrecisionName(*ParsePrecision(name)), name);
  }
  EXPECT_EQ(KnownPeakModels().size(), 18u);
}

}  // namespace
}  // namespace flopscope
