#include "injector/cupti/activity_parser.h"

#include <gtest/gtest.h>

#include "injector/cupti/testing/activity_buffer_builder.h"

namespace flopscope::injector::cupti {
namespace {

using testing::ActivityBufferBuilder;

ParsedBuffer Parse(ActivityBufferBuilder& builder) {
  ParsedBuffer parsed;
  ParseActivityBuffer(&::cuptiActivityGetNextRecord, builder.data(), builder.size(), &parsed);
  return parsed;
}

ActivityBufferBuilder::Kernel Kernel(uint32_t correlation_id, uint64_t start, uint64_t end,
                                     const char* name) {
  ActivityBufferBuilder::Kernel kernel;
  kernel.correlation_id = correlation_id;
  kernel.start = start;
  kernel.end = end;
  kernel.name = name;
  return kernel;
}

TEST(ActivityParserTest, ReadsEveryFieldOfAKernelRecord) {
  ActivityBufferBuilder::Kernel kernel = Kernel(42, 1000, 2500, "_Z4gemmPf");
  kernel.device_id = 3;
  kernel.context_id = 9;
  kernel.stream_id = 13;
  kernel.grid[0] = 128;
  kernel.grid[1] = 2;
  kernel.grid[2] = 1;
  kernel.block[0] = 256;
  kernel.graph_id = 5;
  kernel.graph_node_id = 77;
  ActivityBufferBuilder builder;
  builder.AddKernel(kernel);

  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 1u);
  ASSERT_EQ(parsed.names.size(), 1u);
  const KernelRecord& r = parsed.records[0];
  EXPECT_STREQ(parsed.names[0], "_Z4gemmPf");
  EXPECT_EQ(r.kind, kActivityKernel);
  EXPECT_EQ(r.correlation_id, 42u);
  EXPECT_EQ(r.start_ns, 1000);
  EXPECT_EQ(r.end_ns, 2500);
  EXPECT_EQ(r.device_id, 3u);
  EXPECT_EQ(r.context_id, 9u);
  EXPECT_EQ(r.stream_id, 13u);
  EXPECT_EQ(r.grid_x, 128u);
  EXPECT_EQ(r.grid_y, 2u);
  EXPECT_EQ(r.block_x, 256u);
  EXPECT_EQ(r.graph_id, 5u);
  EXPECT_EQ(r.graph_node_id, 77u);
  EXPECT_EQ(r.path_id, 0u);  // attribution is the joiner's job
  EXPECT_FALSE(parsed.truncated);
}

TEST(ActivityParserTest, KeepsMemoryActivitiesApartFromKernels) {
  ActivityBufferBuilder builder;
  ActivityBufferBuilder::Memory copy{.correlation_id = 5, .start = 10, .end = 20, .bytes = 4096};
  ActivityBufferBuilder::Memory peer{.correlation_id = 6, .start = 30, .end = 45, .bytes = 8192};
  ActivityBufferBuilder::Memory set{.correlation_id = 7, .start = 50, .end = 51, .bytes = 64};
  builder.AddMemcpy(copy).AddPeerMemcpy(peer).AddMemset(set);

  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 3u);
  EXPECT_EQ(parsed.records[0].kind, kActivityMemcpy);
  EXPECT_EQ(parsed.records[0].bytes, 4096u);
  EXPECT_EQ(parsed.records[1].kind, kActivityMemcpy);
  EXPECT_EQ(parsed.records[1].correlation_id, 6u);
  EXPECT_EQ(parsed.records[1].end_ns, 45);
  EXPECT_EQ(parsed.records[2].kind, kActivityMemset);
  EXPECT_EQ(parsed.records[2].bytes, 64u);
  for (const char* name : parsed.names) EXPECT_EQ(name, nullptr);
}

TEST(ActivityParserTest, SkipsKindsItDoesNotUseAndKeepsGoing) {
  ActivityBufferBuilder builder;
  builder.AddExternalCorrelation(1, 99)
      .AddDriverApi(1, 307)
      .AddKernel(Kernel(1, 100, 200, "a"))
      .AddDriverApi(2, 307)
      .AddKernel(Kernel(2, 300, 400, "b"));

  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 2u);
  EXPECT_STREQ(parsed.names[0], "a");
  EXPECT_STREQ(parsed.names[1], "b");
  EXPECT_EQ(parsed.other_records, 3u);
  EXPECT_FALSE(parsed.truncated);
}

TEST(ActivityParserTest, LegacyKernelKindParsesLikeConcurrentKernels) {
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(8, 1, 2, "serial"), CUPTI_ACTIVITY_KIND_KERNEL);
  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_EQ(parsed.records[0].correlation_id, 8u);
}

TEST(ActivityParserTest, CountsActivitiesWithoutTimestamps) {
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(1, 0, 0, "untimed"))
      .AddKernel(Kernel(2, 500, 400, "backwards"))
      .AddKernel(Kernel(3, 500, 600, "fine"));
  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_STREQ(parsed.names[0], "fine");
  // Kernels go by correlation id: the tracer tells counted ones (kernel replay) from losses.
  EXPECT_EQ(parsed.untimed_kernels, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(parsed.untimed, 0u);
}

TEST(ActivityParserTest, ReadsDeviceProperties) {
  ActivityBufferBuilder::Device device;
  device.id = 1;
  device.name = "NVIDIA H100 80GB HBM3";
  device.sm_count = 132;
  device.memory_bytes = 85'520'809'984ull;
  device.clock_khz = 1'980'000;
  device.major = 9;
  device.minor = 0;
  for (int i = 0; i < 16; ++i) device.uuid[i] = static_cast<unsigned char>(0xa0 + i);
  ActivityBufferBuilder builder;
  builder.AddDevice(device);

  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.devices.size(), 1u);
  const DeviceFacts& facts = parsed.devices[0];
  EXPECT_EQ(facts.id, 1u);
  EXPECT_EQ(facts.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(facts.sm_count, 132u);
  EXPECT_EQ(facts.memory_bytes, 85'520'809'984ull);
  EXPECT_EQ(facts.sm_clock_khz, 1'980'000u);
  EXPECT_EQ(facts.compute_capability, 90u);
  EXPECT_EQ(facts.uuid, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
}

TEST(ActivityParserTest, ATruncatedLastRecordIsReportedAndTheRestKept) {
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(1, 10, 20, "whole")).AddKernel(Kernel(2, 30, 40, "cut")).DropTail(8);
  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_STREQ(parsed.names[0], "whole");
  EXPECT_TRUE(parsed.truncated);
}

TEST(ActivityParserTest, AZeroTailEndsTheWalk) {
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(1, 10, 20, "only")).ZeroTail(64);
  const ParsedBuffer parsed = Parse(builder);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_TRUE(parsed.truncated);  // bytes after the last record were not a record
}

TEST(ActivityParserTest, EmptyOrMissingBuffersYieldNothing) {
  ParsedBuffer parsed;
  ParseActivityBuffer(&::cuptiActivityGetNextRecord, nullptr, 128, &parsed);
  uint64_t storage[4] = {};
  ParseActivityBuffer(&::cuptiActivityGetNextRecord, reinterpret_cast<uint8_t*>(storage), 0,
                      &parsed);
  EXPECT_TRUE(parsed.records.empty());
  EXPECT_FALSE(parsed.truncated);
}

}  // namespace
}  // namespace flopscope::injector::cupti
