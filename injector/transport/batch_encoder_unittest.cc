#include "injector/transport/batch_encoder.h"

#include <gtest/gtest.h>

#include "injector/transport/testing/test_batch.h"

namespace flopscope::transport {
namespace {

using testing::TestBatch;
using testing::TestHello;

TEST(BatchEncoderTest, HelloCarriesIdentityAndLayout) {
  v1::SessionHello hello;
  EncodeHello(TestHello(), &hello);
  EXPECT_EQ(hello.protocol_version(), 1u);
  EXPECT_EQ(hello.session_id(), "host-1-2");
  EXPECT_EQ(hello.job_id(), "job-t");
  EXPECT_EQ(hello.rank(), 3);
  EXPECT_EQ(hello.local_rank(), 1);
  EXPECT_EQ(hello.world_size(), 8);
  EXPECT_EQ(hello.layout().tp_size(), 2u);
  EXPECT_EQ(hello.layout().dp_size(), 4u);
  EXPECT_EQ(hello.layout().tp_rank(), 1u);
  EXPECT_EQ(hello.layout().source(), "env");
  EXPECT_EQ(hello.command(), "python train.py");
  EXPECT_EQ(hello.gpu_status(), "no CUDA driver");
  EXPECT_EQ(hello.devices_size(), 0);
}

TEST(BatchEncoderTest, BatchFieldsAreCopied) {
  TestBatch source(5, 2, 3, 1, {fs_loss{1, 9}});
  v1::Batch batch;
  EncodeBatch(source.view(/*final=*/true), 12, false, TransportLosses{}, &batch);
  EXPECT_EQ(batch.seq(), 12u);
  ASSERT_EQ(batch.paths_size(), 2);
  EXPECT_EQ(batch.paths(1).id(), 6u);
  EXPECT_EQ(batch.paths(1).name(), "p6");
  EXPECT_EQ(batch.paths(1).domain(), "");
  ASSERT_EQ(batch.ranges_size(), 3);
  EXPECT_EQ(batch.ranges(2).instance_id(), 3u);
  EXPECT_EQ(batch.ranges(2).thread_id(), 42u);
  EXPECT_EQ(batch.ranges(2).kind(), v1::RANGE_KIND_PUSH_POP);
  ASSERT_EQ(batch.metadata_size(), 1);
  EXPECT_EQ(batch.metadata(0).key(), "key0");
  EXPECT_EQ(batch.metadata(0).value(), "value0");
  ASSERT_EQ(batch.losses_size(), 1);
  EXPECT_EQ(batch.losses(0).cause(), v1::LOSS_CAUSE_BUFFER_FULL);
  EXPECT_EQ(batch.losses(0).records(), 9u);
  EXPECT_TRUE(batch.final());
}

TEST(BatchEncoderTest, KernelsAndStringsAreCopied) {
  const std::string name = "_Z4gemmv";
  fs_string_def string{3, fs_str{name.data(), static_cast<uint32_t>(name.size())}};
  fs_kernel kernel{};
  kernel.correlation_id = 77;
  kernel.path_id = 4;
  kernel.name_id = 3;
  kernel.grid_x = 128;
  kernel.kind = FS_ACTIVITY_KIND_KERNEL;
  fs_batch view{};
  view.strings = &string;
  view.num_strings = 1;
  view.kernels = &kernel;
  view.num_kernels = 1;
  v1::Batch batch;
  EncodeBatch(view, 1, false, TransportLosses{}, &batch);
  ASSERT_EQ(batch.strings_size(), 1);
  EXPECT_EQ(batch.strings(0).value(), name);
  ASSERT_EQ(batch.kernels_size(), 1);
  EXPECT_EQ(batch.kernels(0).correlation_id(), 77u);
  EXPECT_EQ(batch.kernels(0).grid_x(), 128u);
  EXPECT_EQ(batch.kernels(0).kind(), v1::ACTIVITY_KIND_KERNEL);
  EXPECT_FALSE(batch.kernels(0).counted());
  EXPECT_EQ(DroppableRecords(view), 1u);
}

TEST(BatchEncoderTest, CountedFlagsTravelOnRangesAndKernels) {
  fs_range_event ranges[2] = {{1, 1, 0, 42, 100, 200, 1, 0}, {1, 2, 0, 42, 300, 400, 1, 1}};
  fs_kernel kernel{};
  kernel.correlation_id = 5;
  kernel.kind = FS_ACTIVITY_KIND_KERNEL;
  kernel.counted = 1;
  fs_batch view{};
  view.ranges = ranges;
  view.num_ranges = 2;
  view.kernels = &kernel;
  view.num_kernels = 1;
  v1::Batch batch;
  EncodeBatch(view, 1, false, TransportLosses{}, &batch);
  ASSERT_EQ(batch.ranges_size(), 2);
  EXPECT_FALSE(batch.ranges(0).counted());
  EXPECT_TRUE(batch.ranges(1).counted());
  ASSERT_EQ(batch.kernels_size(), 1);
  EXPECT_TRUE(batch.kernels(0).counted());
}

// A v2 batch with one kernel's FLOPs and one window, encoded, serialized, parsed back.
TEST(BatchEncoderTest, KernelFlopsAndWindowsRoundTrip) {
  const std::string tf32 = "tf32_dst_fp32", fp8 = "fp8";
  const std::string ffma = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum";
  const std::string trigger = "env: steps=3-4", set = "full", chip = "GH100", status = "";
  const fs_tensor_flops tensor[2] = {{testing::Str(tf32), 2.5e9}, {testing::Str(fp8), 1e6}};
  const fs_raw_counter raw[1] = {{testing::Str(ffma), 1024}};
  fs_kernel_flops flops{};
  flops.correlation_id = 91;
  flops.path_id = 4;
  flops.range_instance_id = 17;
  flops.name_id = 3;
  flops.device_id = 1;
  flops.phase_path_id = 9;
  flops.counted_step = 3;
  flops.flops = fs_flop_counters{1.0, 2048.0, 8.0, tensor, 2, raw, 1};
  fs_counter_window window{};
  window.first_step = 3;
  window.last_step = 4;
  window.trigger = testing::Str(trigger);
  window.metric_set = testing::Str(set);
  window.chip = testing::Str(chip);
  window.status = testing::Str(status);
  window.passes = 6;
  window.kernels_counted = 120;
  window.ranges_unmatched = 2;
  window.comm_kernels_excluded = 7;
  window.start_ns = 1000;
  window.end_ns = 5000;
  fs_batch view{};
  view.kernel_flops = &flops;
  view.num_kernel_flops = 1;
  view.windows = &window;
  view.num_windows = 1;
  EXPECT_EQ(DroppableRecords(view), 1u);  // the window is not a droppable record

  v1::Batch encoded;
  EncodeBatch(view, 8, false, TransportLosses{}, &encoded);
  v1::Batch batch;
  ASSERT_TRUE(batch.ParseFromString(encoded.SerializeAsString()));
  ASSERT_EQ(batch.kernel_flops_size(), 1);
  const v1::KernelFlops& k = batch.kernel_flops(0);
  EXPECT_EQ(k.correlation_id(), 91u);
  EXPECT_EQ(k.path_id(), 4u);
  EXPECT_EQ(k.range_instance_id(), 17u);
  EXPECT_EQ(k.name_id(), 3u);
  EXPECT_EQ(k.device_id(), 1u);
  EXPECT_EQ(k.phase_path_id(), 9u);
  EXPECT_EQ(k.counted_step(), 3);
  EXPECT_DOUBLE_EQ(k.flops().fp64(), 1.0);
  EXPECT_DOUBLE_EQ(k.flops().fp32(), 2048.0);
  EXPECT_DOUBLE_EQ(k.flops().fp16(), 8.0);
  ASSERT_EQ(k.flops().tensor_size(), 2);
  EXPECT_EQ(k.flops().tensor(0).source(), tf32);
  EXPECT_DOUBLE_EQ(k.flops().tensor(0).flops(), 2.5e9);
  EXPECT_EQ(k.flops().tensor(1).source(), fp8);
  ASSERT_EQ(k.flops().raw_size(), 1);
  EXPECT_EQ(k.flops().raw(0).metric(), ffma);
  EXPECT_DOUBLE_EQ(k.flops().raw(0).value(), 1024);
  ASSERT_EQ(batch.windows_size(), 1);
  const v1::CounterWindowRecord& w = batch.windows(0);
  EXPECT_EQ(w.first_step(), 3);
  EXPECT_EQ(w.last_step(), 4);
  EXPECT_EQ(w.trigger(), trigger);
  EXPECT_EQ(w.metric_set(), "full");
  EXPECT_EQ(w.chip(), "GH100");
  EXPECT_EQ(w.passes(), 6u);
  EXPECT_EQ(w.kernels_counted(), 120u);
  EXPECT_EQ(w.ranges_unmatched(), 2u);
  EXPECT_EQ(w.comm_kernels_excluded(), 7u);
  EXPECT_EQ(w.start_ns(), 1000);
  EXPECT_EQ(w.end_ns(), 5000);
  EXPECT_EQ(w.status(), "");

  // Over the pending bound the FLOPs go with the other records; the window stays.
  v1::Batch dropped;
  EncodeBatch(view, 9, /*drop_records=*/true, TransportLosses{}, &dropped);
  EXPECT_EQ(dropped.kernel_flops_size(), 0);
  EXPECT_EQ(dropped.windows_size(), 1);
}

TEST(BatchEncoderTest, DroppingRecordsKeepsDefinitionsMetadataAndLosses) {
  TestBatch source(1, 2, 5, 1, {fs_loss{4, 1}});
  v1::Batch batch;
  EncodeBatch(source.view(), 2, /*drop_records=*/true, TransportLosses{.daemon_unreachable = 5},
              &batch);
  EXPECT_EQ(batch.paths_size(), 2);
  EXPECT_EQ(batch.ranges_size(), 0);
  EXPECT_EQ(batch.metadata_size(), 1);
  ASSERT_EQ(batch.losses_size(), 2);
  EXPECT_EQ(batch.losses(0).cause(), v1::LOSS_CAUSE_DAEMON_UNREACHABLE);
  EXPECT_EQ(batch.losses(0).records(), 5u);
  EXPECT_EQ(batch.losses(1).cause(), v1::LOSS_CAUSE_UNMATCHED_POP);
  EXPECT_EQ(DroppableRecords(source.view()), 5u);
}

TEST(BatchEncoderTest, TransportLossesAddToTheCoresCounters) {
  TestBatch source(1, 0, 0, 0, {fs_loss{3, 2}});
  v1::Batch batch;
  EncodeBatch(source.view(), 1, false, TransportLosses{.backlog_full = 7, .rejected = 10}, &batch);
  ASSERT_EQ(batch.losses_size(), 2);
  EXPECT_EQ(batch.losses(0).cause(), v1::LOSS_CAUSE_REJECTED);
  EXPECT_EQ(batch.losses(0).records(), 12u);
  EXPECT_EQ(batch.losses(1).cause(), v1::LOSS_CAUSE_BACKLOG_FULL);
  EXPECT_EQ(batch.losses(1).records(), 7u);
}

}  // namespace
}  // namespace flopscope::transport
