// Ingest of counter windows (issue 4): what RankStore keeps of counted records and counted FLOPs.
#include <gtest/gtest.h>

#include <string>

#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_queries.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using fixtures::AddKernel;
using fixtures::AddKernelFlops;
using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::AddString;
using fixtures::AddWindow;

constexpr uint64_t kModelPath = 1;
constexpr uint64_t kLayerPath = 2;
constexpr uint64_t kStepPath = 3;
constexpr uint64_t kForwardPath = 4;

class CountedStoreTest : public ::testing::Test {
 protected:
  CountedStoreTest() : path_(dir_.File("rank-00000.sqlite")) {}

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<SessionHandle> session =
        store_->OpenSession(fixtures::Hello("job-1", 0, "node-1-1-1"));
    ASSERT_TRUE(session.ok()) << session.status();
    sid_ = session->sid;
  }

  // model / layer, and step / forward in the flopscope domain.
  static v1::Batch Definitions(uint64_t seq) {
    v1::Batch batch;
    batch.set_seq(seq);
    AddString(batch, 1, "gemm");
    AddPath(batch, kModelPath, 0, "model");
    AddPath(batch, kLayerPath, kModelPath, "layer");
    AddPath(batch, kStepPath, 0, "step", "flopscope");
    AddPath(batch, kForwardPath, kStepPath, "forward", "flopscope");
    return batch;
  }

  void Commit(const v1::Batch& batch) {
    const absl::Status status = store_->Commit(sid_, batch);
    ASSERT_TRUE(status.ok()) << status;
  }

  double Number(const std::string& sql) { return fixtures::QueryNumber(path_, sql); }

  fixtures::ScopedTempDir dir_;
  std::string path_;
  std::unique_ptr<RankStore> store_;
  int64_t sid_ = 0;
};

TEST_F(CountedStoreTest, CountedRecordsAreStoredButKeptOutOfEveryRollup) {
  v1::Batch batch = Definitions(1);
  AddRange(batch, kLayerPath, 0, 1000);  // uncounted: 1000 ns
  AddRange(batch, kLayerPath, 2000, 9000)->set_counted(true);
  AddKernel(batch, kLayerPath, 1, 100, 300)->set_range_instance_id(1);
  v1::KernelRecord* counted = AddKernel(batch, kLayerPath, 1, 2100, 5000);
  counted->set_counted(true);
  counted->set_range_instance_id(2);
  v1::KernelRecord* copy = AddKernel(batch, kLayerPath, 0, 2200, 70);
  copy->set_kind(v1::ACTIVITY_KIND_MEMCPY);
  copy->set_counted(true);
  Commit(batch);

  EXPECT_EQ(Number("SELECT COUNT(*) FROM range_events"), 2);
  EXPECT_EQ(Number("SELECT SUM(counted) FROM range_events"), 1);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM kernels"), 3);
  EXPECT_EQ(Number("SELECT SUM(counted) FROM kernels"), 2);
  EXPECT_EQ(Number("SELECT kernels FROM sessions"),
            Number("SELECT COUNT(*) FROM kernels WHERE kind NOT IN (2, 3)"))
      << "stored kernels, counted or not; memory copies and sets apart";
  EXPECT_EQ(Number("SELECT calls FROM module_stats WHERE path_id = 2"), 1);
  EXPECT_EQ(Number("SELECT cpu_time_ns FROM module_stats WHERE path_id = 2"), 1000);
  EXPECT_EQ(Number("SELECT max_ns FROM module_stats WHERE path_id = 2"), 1000);
  EXPECT_EQ(Number("SELECT kernels FROM module_stats WHERE path_id = 2"), 1);
  EXPECT_EQ(Number("SELECT gpu_time_ns FROM module_stats WHERE path_id = 2"), 300);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM memory_stats"), 0);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM instance_stats"), 1);
  EXPECT_EQ(Number("SELECT last_end_ns - first_start_ns FROM instance_stats"), 300);
}

TEST_F(CountedStoreTest, CountedFlopsRollUpByModulePrecisionAndPhase) {
  v1::Batch batch = Definitions(1);
  v1::FlopCounters* gemm = AddKernelFlops(batch, kLayerPath, 1, 3, kForwardPath)->mutable_flops();
  gemm->set_fp32(100);
  gemm->add_tensor()->set_source("bf16_dst_fp32");
  gemm->mutable_tensor(0)->set_flops(4000);
  v1::FlopCounters* add = AddKernelFlops(batch, kLayerPath, 1, 3, kForwardPath)->mutable_flops();
  add->set_fp32(10);
  add->set_fp16(6);
  AddKernelFlops(batch, kModelPath, 1, 4, kStepPath)->mutable_flops()->set_fp64(2);
  AddKernelFlops(batch, 0, 0, -1, 0);  // counted, but no FLOPs at all
  Commit(batch);

  EXPECT_EQ(Number("SELECT COUNT(*) FROM kernel_flops"), 4);
  EXPECT_EQ(Number("SELECT phase_path_id FROM kernel_flops WHERE fp64 > 0"), kStepPath);
  EXPECT_EQ(Number("SELECT flops FROM module_stats WHERE path_id = 2"), 4116);
  EXPECT_EQ(Number("SELECT counted_kernels FROM module_stats WHERE path_id = 2"), 2);
  EXPECT_EQ(Number("SELECT calls FROM module_stats WHERE path_id = 2"), 0);
  EXPECT_EQ(Number("SELECT flops FROM module_stats WHERE path_id = 0"), 0);
  EXPECT_EQ(Number("SELECT counted_kernels FROM module_stats WHERE path_id = 0"), 1);
  EXPECT_EQ(Number("SELECT flops FROM module_flops WHERE path_id = 2 AND precision = 'fp32'"), 110);
  EXPECT_EQ(Number("SELECT kernels FROM module_flops WHERE path_id = 2 AND precision = 'fp32'"), 2);
  EXPECT_EQ(Number("SELECT flops FROM module_flops WHERE path_id = 2 AND precision = 'fp16'"), 6);
  EXPECT_EQ(Number("SELECT flops FROM module_flops WHERE path_id = 2 AND "
                   "precision = 'tensor:bf16_dst_fp32'"),
            4000);
  EXPECT_EQ(Number("SELECT flops FROM module_flops WHERE path_id = 1 AND precision = 'fp64'"), 2);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM module_flops"), 4) << "no rows for zero FLOPs";
  EXPECT_EQ(Number("SELECT SUM(flops) FROM phase_flops WHERE phase_path_id = 4"), 4116);
  EXPECT_EQ(Number("SELECT flops FROM phase_flops WHERE phase_path_id = 3"), 2);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM counted_steps"), 2);
  EXPECT_EQ(Number("SELECT MIN(step) FROM counted_steps"), 3);
}

TEST_F(CountedStoreTest, RollupsAccumulateAcrossBatchesAndStepsCountOnce) {
  v1::Batch first = Definitions(1);
  AddKernelFlops(first, kLayerPath, 1, 3, kForwardPath)->mutable_flops()->set_fp32(100);
  Commit(first);
  v1::Batch second;
  second.set_seq(2);
  AddKernelFlops(second, kLayerPath, 1, 3, kForwardPath)->mutable_flops()->set_fp32(50);
  AddKernelFlops(second, kLayerPath, 1, 4, kForwardPath)->mutable_flops()->set_fp32(25);
  Commit(second);

  EXPECT_EQ(Number("SELECT flops FROM module_stats WHERE path_id = 2"), 175);
  EXPECT_EQ(Number("SELECT counted_kernels FROM module_stats WHERE path_id = 2"), 3);
  EXPECT_EQ(Number("SELECT flops FROM module_flops WHERE path_id = 2"), 175);
  EXPECT_EQ(Number("SELECT kernels FROM module_flops WHERE path_id = 2"), 3);
  EXPECT_EQ(Number("SELECT flops FROM phase_flops WHERE phase_path_id = 4"), 175);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM counted_steps"), 2);

  // A resent batch is a duplicate: nothing is added twice.
  Commit(second);
  EXPECT_EQ(Number("SELECT flops FROM module_stats WHERE path_id = 2"), 175);
}

TEST_F(CountedStoreTest, WindowsAreStoredAndTheirStepsCount) {
  v1::Batch batch = Definitions(1);
  v1::CounterWindowRecord* window = AddWindow(batch, 5, 7);
  window->set_kernels_counted(120);
  window->set_ranges_unmatched(2);
  window->set_comm_kernels_excluded(4);
  AddWindow(batch, 9, 9)->set_status("hardware busy (DCGM?)");  // counted nothing
  AddWindow(batch, -1, -1);                                     // no step marks
  AddKernelFlops(batch, kLayerPath, 1, 6, kForwardPath)->mutable_flops()->set_fp32(1);
  Commit(batch);

  EXPECT_EQ(Number("SELECT COUNT(*) FROM counter_windows"), 3);
  EXPECT_EQ(Number("SELECT kernels_counted FROM counter_windows WHERE first_step = 5"), 120);
  EXPECT_EQ(Number("SELECT ranges_unmatched FROM counter_windows WHERE first_step = 5"), 2);
  EXPECT_EQ(Number("SELECT comm_kernels_excluded FROM counter_windows WHERE first_step = 5"), 4);
  EXPECT_EQ(Number("SELECT passes FROM counter_windows WHERE first_step = 5"), 3);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM counter_windows WHERE status LIKE 'hardware busy%'"), 1);
  // Steps 5, 6, 7 (the kernel's step 6 among them); the failed window's step 9 is not one.
  EXPECT_EQ(Number("SELECT COUNT(*) FROM counted_steps"), 3);
  EXPECT_EQ(Number("SELECT MAX(step) FROM counted_steps"), 7);
}

TEST_F(CountedStoreTest, AnInvalidCountedRecordStoresNothingOfTheBatch) {
  v1::Batch batch = Definitions(1);
  AddKernel(batch, kLayerPath, 1, 0, 10);
  AddKernelFlops(batch, kLayerPath, 1, 3, 99)->mutable_flops()->set_fp32(1);
  const absl::Status status = store_->Commit(sid_, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "batch seq 1: kernel_flops[0]: phase_path_id 99 is not defined");
  EXPECT_EQ(Number("SELECT COUNT(*) FROM kernels"), 0);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM kernel_flops"), 0);
  EXPECT_EQ(Number("SELECT COUNT(*) FROM module_flops"), 0);
}

}  // namespace
}  // namespace flopscope::daemon
