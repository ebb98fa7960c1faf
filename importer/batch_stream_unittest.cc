#include "importer/batch_stream.h"

#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"

namespace flopscope::importer {
namespace {

ImportPlan PlanWith(size_t kernels, size_t kernel_name_bytes) {
  ImportPlan plan;
  plan.time_offset_ns = 1000;
  v1::RangePath& path = plan.paths.emplace_back();
  path.set_id(1);
  path.set_name("Model_0");
  plan.ranges.push_back({1, 1, 0, 9, 0, 100, v1::RANGE_KIND_PUSH_POP});
  for (size_t i = 0; i < kernels; ++i) {
    GpuActivity kernel;
    kernel.name =
        plan.recording.strings.Intern(std::to_string(i) + std::string(kernel_name_bytes, 'k'));
    kernel.start_ns = static_cast<int64_t>(i);
    kernel.end_ns = static_cast<int64_t>(i) + 1;
    plan.recording.activities.push_back(kernel);
    plan.attributions.push_back({1, 1});
  }
  plan.metadata.emplace_back().set_key("import.source");
  return plan;
}

std::vector<v1::Batch> All(const ImportPlan& plan) {
  BatchStream stream(plan);
  std::vector<v1::Batch> batches;
  v1::Batch batch;
  while (stream.Next(&batch)) batches.push_back(batch);
  return batches;
}

size_t Records(const v1::Batch& b) {
  return b.strings_size() + b.paths_size() + b.ranges_size() + b.kernels_size() +
         b.metadata_size() + b.losses_size() + b.kernel_flops_size();
}

TEST(BatchStreamTest, DefinitionsComeBeforeUseAndTheLastBatchIsFinal) {
  const ImportPlan plan = PlanWith(25000, 8);
  const std::vector<v1::Batch> batches = All(plan);
  ASSERT_GE(batches.size(), 5u);
  absl::flat_hash_set<uint32_t> strings;
  absl::flat_hash_set<uint64_t> paths;
  size_t kernels = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const v1::Batch& batch = batches[i];
    EXPECT_EQ(batch.seq(), i + 1);
    EXPECT_LE(Records(batch), BatchStream::kMaxRecords);
    EXPECT_EQ(batch.final(), i + 1 == batches.size());
    for (const v1::StringDef& def : batch.strings()) strings.insert(def.id());
    for (const v1::RangePath& def : batch.paths()) paths.insert(def.id());
    for (const v1::RangeEvent& range : batch.ranges()) {
      EXPECT_TRUE(paths.contains(range.path_id()));
      EXPECT_EQ(range.start_ns(), 1000);
    }
    for (const v1::KernelRecord& kernel : batch.kernels()) {
      EXPECT_TRUE(strings.contains(kernel.name_id()));
      EXPECT_TRUE(paths.contains(kernel.path_id()));
      EXPECT_EQ(kernel.start_ns(), 1000 + static_cast<int64_t>(kernels++));
    }
  }
  EXPECT_EQ(kernels, 25000u);
  EXPECT_EQ(batches.back().metadata_size(), 1);
}

TEST(BatchStreamTest, LongNamesMakeSmallerBatches) {
  const std::vector<v1::Batch> batches = All(PlanWith(3000, 20000));
  for (const v1::Batch& batch : batches) {
    EXPECT_LT(batch.ByteSizeLong(), 2 * BatchStream::kMaxBytes);
  }
  EXPECT_GT(batches.size(), 10u);
}

TEST(BatchStreamTest, SameBatchesEveryTime) {
  const ImportPlan plan = PlanWith(12000, 8);
  const std::vector<v1::Batch> first = All(plan);
  const std::vector<v1::Batch> second = All(plan);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].SerializeAsString(), second[i].SerializeAsString());
  }
}

TEST(BatchStreamTest, CountedFlopsFollowTheirKernelsWithAttributionAndStep) {
  ImportPlan plan = PlanWith(3, 8);
  plan.recording.activities[1].correlation_id = 42;
  plan.recording.activities[1].device = 3;
  plan.flops[1].set_fp32(1e6);
  plan.flops[1].add_tensor()->set_source("fp16_dst_fp32");
  plan.flops[1].mutable_tensor(0)->set_flops(2e6);
  plan.counted_context[1] = {7, 1};
  plan.flops[2].set_fp64(5);  // no launch found: no step, no phase
  const std::vector<v1::Batch> batches = All(plan);
  ASSERT_EQ(batches.size(), 1u);
  const v1::Batch& batch = batches[0];
  ASSERT_EQ(batch.kernel_flops_size(), 2);
  const v1::KernelFlops& counted = batch.kernel_flops(0);
  EXPECT_EQ(counted.correlation_id(), 42u);
  EXPECT_EQ(counted.path_id(), 1u);
  EXPECT_EQ(counted.range_instance_id(), 1u);
  EXPECT_EQ(counted.name_id(), plan.recording.activities[1].name);
  EXPECT_EQ(counted.device_id(), 3u);
  EXPECT_EQ(counted.counted_step(), 7);
  EXPECT_EQ(counted.phase_path_id(), 1u);
  EXPECT_DOUBLE_EQ(counted.flops().fp32(), 1e6);
  EXPECT_EQ(counted.flops().tensor(0).source(), "fp16_dst_fp32");
  EXPECT_EQ(batch.kernel_flops(1).counted_step(), -1);
  EXPECT_EQ(batch.kernel_flops(1).phase_path_id(), 0u);
  EXPECT_DOUBLE_EQ(batch.kernel_flops(1).flops().fp64(), 5);
}

TEST(BatchStreamTest, AnEmptyPlanIsOneFinalBatch) {
  const std::vector<v1::Batch> batches = All(ImportPlan());
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].final());
  EXPECT_EQ(Records(batches[0]), 0u);
}

}  // namespace
}  // namespace flopscope::importer
