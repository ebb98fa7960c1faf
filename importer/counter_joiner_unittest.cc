#include "importer/counter_joiner.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

constexpr char kFfma[] = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum";
constexpr char kHfma[] = "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum";

class CounterJoinerTest : public ::testing::Test {
 protected:
  void AddSample(const std::string& name, int64_t start, double ffma, double hfma) {
    CounterSample sample;
    sample.name = recording_.strings.Intern(name);
    sample.start_ns = start;
    sample.end_ns = start + 10;
    sample.counters = {{recording_.strings.Intern(kFfma), ffma},
                       {recording_.strings.Intern(kHfma), hfma}};
    recording_.counter_samples.push_back(sample);
  }
  void AddKernel(const std::string& name, int64_t start) {
    GpuActivity kernel;
    kernel.name = recording_.strings.Intern(name);
    kernel.start_ns = start;
    recording_.activities.push_back(kernel);
  }
  void AddLaunch(uint64_t correlation, int64_t time, bool kernel = true) {
    recording_.launches[correlation] = LaunchSite{1, time, kernel};
  }

  TraceRecording recording_;
  absl::flat_hash_map<size_t, v1::FlopCounters> flops_;
};

TEST_F(CounterJoinerTest, SamplesJoinKernelsInStartOrderWhenNamesAgree) {
  AddKernel("b", 200);
  AddKernel("a", 100);
  AddSample("a", 5, 10, 0);
  AddSample("__missing__", 6, 20, 1);
  const CounterJoiner::Result result = CounterJoiner::Join(&recording_, &flops_);
  EXPECT_EQ(result.how, "kernel order");
  ASSERT_EQ(flops_.size(), 2u);
  EXPECT_DOUBLE_EQ(flops_[1].fp32(), 2 * 10);  // kernel "a" started first
  EXPECT_DOUBLE_EQ(flops_[0].fp32(), 2 * 20);
  EXPECT_DOUBLE_EQ(flops_[0].fp16(), 4 * 1);
  EXPECT_EQ(flops_[0].raw_size(), 2);
}

TEST_F(CounterJoinerTest, MismatchedSamplesJoinNothing) {
  AddKernel("a", 100);
  AddSample("other", 5, 10, 0);
  const CounterJoiner::Result result = CounterJoiner::Join(&recording_, &flops_);
  EXPECT_EQ(result.unmatched, 1u);
  EXPECT_TRUE(flops_.empty());
  EXPECT_EQ(recording_.activities.size(), 1u);
}

TEST_F(CounterJoinerTest, WithoutKernelsSamplesBecomeKernelsJoinedToLaunches) {
  AddSample("k1", 10, 1, 0);
  AddSample("k2", 20, 2, 0);
  AddLaunch(700, 5);
  AddLaunch(900, 1, false);  // a memcpy: not a kernel launch
  AddLaunch(800, 7);
  const CounterJoiner::Result result = CounterJoiner::Join(&recording_, &flops_);
  EXPECT_EQ(result.joined, 2u);
  ASSERT_EQ(recording_.activities.size(), 2u);
  EXPECT_EQ(recording_.activities[0].correlation_id, 700u);
  EXPECT_EQ(recording_.activities[1].correlation_id, 800u);
  EXPECT_EQ(recording_.strings.Get(recording_.activities[1].name), "k2");
  EXPECT_DOUBLE_EQ(flops_[1].fp32(), 4);
}

TEST_F(CounterJoinerTest, TensorOpsAreFlopsBySource) {
  CounterSample sample;
  sample.name = recording_.strings.Intern("gemm");
  sample.counters = {{recording_.strings.Intern("sm__ops_path_tensor_src_bf16_dst_fp32.sum"), 8e9}};
  const v1::FlopCounters flops = CounterJoiner::FlopsOf(recording_, sample);
  ASSERT_EQ(flops.tensor_size(), 1);
  EXPECT_EQ(flops.tensor(0).source(), "bf16_dst_fp32");
  EXPECT_DOUBLE_EQ(flops.tensor(0).flops(), 8e9);
}

}  // namespace
}  // namespace flopscope::importer
