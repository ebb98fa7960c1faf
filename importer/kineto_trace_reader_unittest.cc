#include "importer/kineto_trace_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "importer/testing/temp_dir.h"

namespace flopscope::importer {
namespace {

using ::testing::HasSubstr;

class KinetoTraceReaderTest : public ::testing::Test {
 protected:
  absl::StatusOr<TraceRecording> Read(const std::string& json) {
    const std::string path = dir_.File("trace.json");
    std::ofstream(path, std::ios::binary) << json;
    return ReadKinetoTrace(path, nullptr);
  }
  testing::TempDir dir_;
};

TEST_F(KinetoTraceReaderTest, ReadsTheEventsThatMatter) {
  absl::StatusOr<TraceRecording> recording = Read(R"({
    "schemaVersion": 1,
    "baseTimeNanoseconds": 1700000000000000000,
    "traceEvents": [
      {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_3", "pid": 9, "tid": 9,
       "ts": 10.5, "dur": 5, "args": {"Python id": 4, "Python parent id": 1}},
      {"ph": "X", "cat": "python_function", "name": "torch/nn/functional.py(1): linear",
       "pid": 9, "tid": 9, "ts": 11, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": 11, "dur": 1},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
       "ts": 12.001, "dur": 1, "args": {"correlation": 77, "cbid": 211}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 9, "tid": 9,
       "ts": 13, "dur": 1, "args": {"cbid": 165}},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 2.25,
       "args": {"device": 0, "context": 1, "stream": 7, "correlation": 77,
                "grid": [4, 2, 1], "block": [128, 1, 1]}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 30,
       "dur": 1, "args": {"device": 0, "stream": 7, "correlation": 78, "bytes": 4096}},
      {"ph": "X", "cat": "gpu_user_annotation", "name": "block", "pid": 0, "tid": 7, "ts": 19,
       "dur": 20, "args": {"External id": 5}},
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 9, "tid": 9,
       "ts": 1, "dur": -3},
      {"ph": "s", "cat": "ac2g", "id": 77, "pid": 9, "tid": 9, "ts": 12},
      {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "python"}}
    ],
    "deviceProperties": "[{'id': 0, 'name': 'NVIDIA A100', 'totalGlobalMem': 42, 'computeMajor': 8, 'computeMinor': 0, 'numSms': 108}]",
    "distributedInfo": "{'backend': 'nccl', 'rank': 3, 'world_size': 4}"
  })");
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_EQ(recording->format, "kineto-json");
  EXPECT_EQ(recording->format_version, "1");
  EXPECT_EQ(recording->base_time_ns, 1700000000000000000);
  EXPECT_EQ(recording->rank, 3);
  EXPECT_EQ(recording->world_size, 4);
  EXPECT_EQ(recording->pid, 9);
  ASSERT_EQ(recording->devices.size(), 1u);
  EXPECT_EQ(recording->devices[0].name(), "NVIDIA A100");
  EXPECT_EQ(recording->devices[0].compute_capability(), 80u);

  ASSERT_EQ(recording->ranges.size(), 3u);
  EXPECT_EQ(recording->strings.Get(recording->ranges[0].name), "Linear_3");
  EXPECT_EQ(recording->ranges[0].origin, RangeOrigin::kPythonModule);
  EXPECT_EQ(recording->ranges[0].start_ns, 10500);
  EXPECT_EQ(recording->ranges[1].origin, RangeOrigin::kGpuAnnotation);
  EXPECT_EQ(recording->ranges[1].thread, StreamKey(0, 7));
  EXPECT_EQ(recording->ranges[1].external_id, 5u);
  EXPECT_EQ(recording->ranges[2].end_ns, recording->ranges[2].start_ns);  // dur -3 clamped
  EXPECT_EQ(recording->negative_durations, 1u);

  ASSERT_EQ(recording->launches.size(), 1u);
  const LaunchSite& launch = recording->launches.at(77);
  EXPECT_EQ(launch.thread, 9u);
  EXPECT_EQ(launch.time_ns, 12001);
  EXPECT_TRUE(launch.launches_kernel);

  ASSERT_EQ(recording->activities.size(), 2u);
  const GpuActivity& kernel = recording->activities[0];
  EXPECT_EQ(recording->strings.Get(kernel.name), "gemm");
  EXPECT_EQ(kernel.end_ns - kernel.start_ns, 2250);
  EXPECT_EQ(kernel.grid[0], 4u);
  EXPECT_EQ(kernel.grid[1], 2u);
  EXPECT_EQ(kernel.block[0], 128u);
  EXPECT_EQ(recording->activities[1].kind, v1::ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(recording->activities[1].bytes, 4096u);
  EXPECT_EQ(recording->activities[1].name, 0u);
}

TEST_F(KinetoTraceReaderTest, LegacyCategoriesAndStringThreadIds) {
  absl::StatusOr<TraceRecording> recording = Read(R"({"traceEvents": [
      {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": "25738",
       "ts": 100, "dur": 50},
      {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 1, "tid": "25738",
       "ts": 101, "dur": 5},
      {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "25738",
       "ts": 102, "dur": 1, "args": {"correlation": 5, "external id": 9}},
      {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 110,
       "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 5}}]})");
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_EQ(recording->format, "kineto-json-legacy");
  ASSERT_EQ(recording->ranges.size(), 1u) << "operators are not ranges, the step is";
  EXPECT_EQ(recording->ranges[0].thread, 25738u);
  EXPECT_EQ(recording->launches.at(5).thread, 25738u);
  EXPECT_EQ(recording->activities.size(), 1u);
}

TEST_F(KinetoTraceReaderTest, MalformedEventsAreErrorsWithTheirOffset) {
  const std::string missing_ts = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]})";
  absl::StatusOr<TraceRecording> recording = Read(missing_ts);
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("offset 17"));
  EXPECT_THAT(recording.status().message(), HasSubstr("no valid ts"));

  recording = Read(R"({"traceEvents": [{"ph": "X", "ts": 1, "bad": tru}]})");
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("invalid JSON"));

  recording = Read(R"({"displayTimeUnit": "ms"})");
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("traceEvents"));

  recording = Read(R"({"traceEvents": [], "deviceProperties": "not a repr {"})");
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("deviceProperties"));
}

}  // namespace
}  // namespace flopscope::importer
