#include "injector/cupti/tracer_options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace flopscope::injector::cupti {
namespace {

EnvLookup Env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

TEST(TracerOptionsTest, DefaultsWorkOutOfTheBox) {
  const TracerOptions options = TracerOptionsFromEnvironment(Env({}));
  EXPECT_TRUE(options.enabled);
  EXPECT_TRUE(options.cupti_path.empty());
  EXPECT_EQ(options.buffer_cap_bytes, 32ull << 20);
  // D2: no cuptiFinalize at exit unless asked for, and no recording.
  EXPECT_FALSE(options.finalize_at_exit);
  EXPECT_TRUE(options.record_dir.empty());
  EXPECT_TRUE(options.warnings.empty());
}

TEST(TracerOptionsTest, ReadsEverySetting) {
  const TracerOptions options =
      TracerOptionsFromEnvironment(Env({{"FLOPSCOPE_KERNELS", "0"},
                                        {"FLOPSCOPE_CUPTI_PATH", "/opt/cuda/lib64/libcupti.so.13"},
                                        {"FLOPSCOPE_CUPTI_BUFFER_MB", "128"},
                                        {"FLOPSCOPE_CUPTI_FINALIZE", "on"},
                                        {"FLOPSCOPE_RECORD_DIR", "/tmp/rec"}}));
  EXPECT_FALSE(options.enabled);
  EXPECT_EQ(options.cupti_path, "/opt/cuda/lib64/libcupti.so.13");
  EXPECT_EQ(options.buffer_cap_bytes, 128ull << 20);
  EXPECT_TRUE(options.finalize_at_exit);
  EXPECT_EQ(options.record_dir, "/tmp/rec");
}

TEST(TracerOptionsTest, MalformedValuesAreReportedAndReplacedByDefaults) {
  const TracerOptions options = TracerOptionsFromEnvironment(
      Env({{"FLOPSCOPE_KERNELS", "maybe"}, {"FLOPSCOPE_CUPTI_BUFFER_MB", "2"}}));
  EXPECT_TRUE(options.enabled);
  EXPECT_EQ(options.buffer_cap_bytes, 32ull << 20);
  ASSERT_EQ(options.warnings.size(), 2u);
  EXPECT_NE(options.warnings[0].find("FLOPSCOPE_KERNELS='maybe'"), std::string::npos);
  EXPECT_NE(options.warnings[1].find("[4, 4096]"), std::string::npos);
}

TEST(AttachFailureTest, NamesTheToolHoldingCupti) {
  const std::string status = DescribeAttachFailure(
      AttachStep::kSubscribe, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
      "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", "CUPTI for Nsight Systems");
  EXPECT_EQ(status, "CUPTI is held by another tool (CUPTI for Nsight Systems): NVTX ranges only");
  const std::string unnamed = DescribeAttachFailure(
      AttachStep::kSubscribe, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "x", "");
  EXPECT_NE(unnamed.find("nsys, ncu"), std::string::npos);
}

TEST(AttachFailureTest, ExplainsAdminOnlyProfilingAndMissingDrivers) {
  EXPECT_NE(DescribeAttachFailure(AttachStep::kEnableActivity, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
                                  "x", "")
                .find("NVreg_RestrictProfilingToAdminUsers"),
            std::string::npos);
  EXPECT_EQ(
      DescribeAttachFailure(AttachStep::kSubscribe, CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN", ""),
      "CUPTI could not start (CUPTI_ERROR_UNKNOWN; no usable CUDA driver?): NVTX ranges only");
  EXPECT_EQ(DescribeAttachFailure(AttachStep::kRegisterBuffers, CUPTI_ERROR_INVALID_OPERATION,
                                  "CUPTI_ERROR_INVALID_OPERATION", ""),
            "cuptiActivityRegisterCallbacks failed (CUPTI_ERROR_INVALID_OPERATION): NVTX ranges "
            "only");
}

}  // namespace
}  // namespace flopscope::injector::cupti
