#include "daemon/report/gpu_metadata.h"

#include <gtest/gtest.h>

namespace flopscope::daemon {
namespace {

v1::Metadata Entry(const std::string& key, const std::string& value) {
  v1::Metadata entry;
  entry.set_key(key);
  entry.set_value(value);
  return entry;
}

TEST(GpuMetadataTest, DevicesAreBuiltFromTheInjectorsKeys) {
  v1::RankInfo rank;
  ApplyGpuMetadata({Entry("gpu.0.name", "NVIDIA H100 80GB HBM3"), Entry("gpu.0.chip", "GH100"),
                    Entry("gpu.0.sm_count", "132"), Entry("gpu.0.sm_clock_khz", "1980000"),
                    Entry("gpu.0.memory_bytes", "85520809984"),
                    Entry("gpu.0.compute_capability", "90"), Entry("gpu.0.uuid", "GPU-1234"),
                    Entry("gpu.1.name", "NVIDIA H100 80GB HBM3"), Entry("batch_size", "8")},
                   &rank);
  ASSERT_EQ(rank.devices_size(), 2);
  const v1::Device& first = rank.devices(0);
  EXPECT_EQ(first.index(), 0u);
  EXPECT_EQ(first.name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(first.chip(), "GH100");
  EXPECT_EQ(first.sm_count(), 132u);
  EXPECT_EQ(first.sm_clock_khz(), 1980000u);
  EXPECT_EQ(first.memory_bytes(), 85520809984u);
  EXPECT_EQ(first.compute_capability(), 90u);
  EXPECT_EQ(first.uuid(), "GPU-1234");
  EXPECT_EQ(rank.devices(1).index(), 1u);
}

TEST(GpuMetadataTest, FillsTheHellosDeviceOfTheSameIndex) {
  v1::RankInfo rank;
  v1::Device* from_hello = rank.add_devices();
  from_hello->set_index(0);
  from_hello->set_name("from hello");
  ApplyGpuMetadata({Entry("gpu.0.chip", "GB100")}, &rank);
  ASSERT_EQ(rank.devices_size(), 1);
  EXPECT_EQ(rank.devices(0).name(), "from hello");
  EXPECT_EQ(rank.devices(0).chip(), "GB100");
}

TEST(GpuMetadataTest, TheLatestStatusWins) {
  v1::RankInfo rank;
  rank.set_gpu_status("CUDA was not initialised in this process");
  ApplyGpuMetadata({Entry("gpu.status", "first"), Entry("gpu.status", "tracing kernels")}, &rank);
  EXPECT_EQ(rank.gpu_status(), "tracing kernels");
}

TEST(GpuMetadataTest, MalformedKeysAndNumbersAreIgnored) {
  v1::RankInfo rank;
  ApplyGpuMetadata({Entry("gpu.x.name", "bad index"), Entry("gpu.0", "no field"),
                    Entry("gpu.0.sm_count", "many"), Entry("gpu.0.name", "ok")},
                   &rank);
  ASSERT_EQ(rank.devices_size(), 1);
  EXPECT_EQ(rank.devices(0).sm_count(), 0u);
  EXPECT_EQ(rank.devices(0).name(), "ok");
}

TEST(GpuMetadataTest, KnowsItsOwnKeys) {
  EXPECT_TRUE(IsInjectorGpuKey("gpu.status"));
  EXPECT_TRUE(IsInjectorGpuKey("gpu.3.name"));
  EXPECT_TRUE(IsInjectorGpuKey("kernels.launch_not_seen"));
  EXPECT_FALSE(IsInjectorGpuKey("batch_size"));
  EXPECT_FALSE(IsInjectorGpuKey("params Model"));
}

}  // namespace
}  // namespace flopscope::daemon
