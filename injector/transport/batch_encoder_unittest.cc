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
  kernel.kind = 1;
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
  EXPECT_FALSE(batch.kernels(0).has_flops());
  EXPECT_EQ(DroppableRecords(view), 1u);
}

TEST(BatchEncoderTest, DroppingRecordsKeepsDefinitionsMetadataAndLosses) {
  TestBatch source(1, 2, 5, 1, {fs_loss{4, 1}});
  v1::Batch batch;
  EncodeBatch(source.view(), 2, /*drop_records=*/true, TransportLosses{5, 0}, &batch);
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
  EncodeBatch(source.view(), 1, false, TransportLosses{0, 10}, &batch);
  ASSERT_EQ(batch.losses_size(), 1);
  EXPECT_EQ(batch.losses(0).cause(), v1::LOSS_CAUSE_REJECTED);
  EXPECT_EQ(batch.losses(0).records(), 12u);
}

}  // namespace
}  // namespace flopscope::transport
