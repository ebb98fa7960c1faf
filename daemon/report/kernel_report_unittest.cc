// Kernels from a batch to the report: BatchRollup and BatchWriter at ingest (module_stats,
// memory_stats, instance_stats), RankReader and ReportBuilder at query time.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "daemon/query/rank_reader.h"
#include "daemon/report/report_builder.h"
#include "daemon/store/batch_rollup.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_reports.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using fixtures::BaseNs;
using fixtures::FindModule;

v1::KernelRecord* Kernel(v1::Batch& batch, uint64_t path, uint64_t instance, uint32_t name,
                         int64_t start, int64_t duration) {
  v1::KernelRecord* kernel = fixtures::AddKernel(batch, path, name, start, duration);
  kernel->set_range_instance_id(instance);
  return kernel;
}

v1::KernelRecord* Memory(v1::Batch& batch, uint64_t path, v1::ActivityKind kind, int64_t start,
                         int64_t duration, uint64_t bytes) {
  v1::KernelRecord* record = fixtures::AddKernel(batch, path, 0, start, duration);
  record->set_kind(kind);
  record->set_bytes(bytes);
  return record;
}

v1::RangeEvent* Range(v1::Batch& batch, uint64_t path, uint64_t instance, uint64_t parent,
                      int64_t start, int64_t duration) {
  v1::RangeEvent* range = fixtures::AddRange(batch, path, start, duration);
  range->set_instance_id(instance);
  range->set_parent_instance_id(parent);
  return range;
}

TEST(OccurrenceKeyTest, KernelsCountInTheirRangeOccurrence) {
  v1::KernelRecord kernel;
  kernel.set_path_id(3);
  kernel.set_range_instance_id(77);
  EXPECT_EQ(OccurrenceKey(kernel), 77u);
  kernel.set_range_instance_id(0);
  EXPECT_EQ(OccurrenceKey(kernel), 0u);  // no occurrence: not part of any span
  kernel.set_graph_id(2);
  kernel.set_correlation_id(5);
  const uint64_t replay = OccurrenceKey(kernel);
  EXPECT_NE(replay & (uint64_t{1} << 63), 0u);  // a graph replay, keyed apart from real ids
  kernel.set_path_id(4);
  EXPECT_NE(OccurrenceKey(kernel), replay);  // one occurrence per (graph launch, path)
  kernel.set_kind(v1::ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(OccurrenceKey(kernel), 0u);
}

TEST(BatchRollupTest, MemoryActivitiesAreKeptApartFromKernels) {
  v1::Batch batch;
  Kernel(batch, 1, 10, 1, 0, 100);
  Memory(batch, 1, v1::ACTIVITY_KIND_MEMCPY, 200, 50, 4096);
  Memory(batch, 1, v1::ACTIVITY_KIND_MEMSET, 300, 5, 64);
  BatchRollup rollup;
  rollup.AddBatch(batch);
  const SelfStats& stats = rollup.by_path().at(1);
  EXPECT_EQ(stats.kernels, 1u);
  EXPECT_EQ(stats.gpu_time_ns, 100);
  EXPECT_EQ(stats.copies.count, 1u);
  EXPECT_EQ(stats.copies.bytes, 4096u);
  EXPECT_EQ(stats.sets.time_ns, 5);
  ASSERT_EQ(rollup.by_occurrence().size(), 1u);  // memory activities have no span
}

TEST(BatchRollupTest, BusyTimeIsTheUnionOfOverlappingKernels) {
  v1::Batch batch;
  Kernel(batch, 1, 10, 1, 50, 100);  // 50..150
  Kernel(batch, 1, 10, 1, 0, 100);   // 0..100, listed later (another stream)
  Kernel(batch, 1, 10, 1, 300, 10);  // 300..310
  BatchRollup rollup;
  rollup.AddBatch(batch);
  const InstanceActivity& activity = rollup.by_occurrence().at(10);
  EXPECT_EQ(activity.kernels, 3u);
  EXPECT_EQ(activity.last_end_ns - activity.first_start_ns, 310);
  EXPECT_EQ(activity.busy_ns, 160);
}

class KernelReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(dir_.File("rank.sqlite"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<SessionHandle> session =
        store_->OpenSession(fixtures::Hello("job-k", 0, "node-1-1-1"));
    ASSERT_TRUE(session.ok());
    sid_ = session->sid;
  }

  void Commit(v1::Batch batch) {
    batch.set_seq(++seq_);
    const absl::Status status = store_->Commit(sid_, batch);
    ASSERT_TRUE(status.ok()) << status;
  }

  v1::Report Report(const std::string& kernels_of = "") {
    RankReadOptions options;
    options.kernel_groups = !kernels_of.empty();
    absl::StatusOr<RankSnapshot> snapshot = RankReader::Read(dir_.File("rank.sqlite"), options);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    ReportBuilder builder("job-k");
    if (!kernels_of.empty()) builder.ListTopKernels(kernels_of, 3);
    v1::RankInfo rank;
    rank.set_gpu_status("CUDA was not initialised in this process");
    builder.AddRank(rank, *snapshot);
    known_path_ = builder.KnowsTopKernelsPath();
    return builder.Build();
  }

  // Model (1, occurrence 100) > attn (2, 101) and mlp (3, 102); kernels of one step arrive in
  // two batches, after the ranges closed (as GPU work does).
  void CommitOneStep() {
    v1::Batch definitions;
    fixtures::AddPath(definitions, 1, 0, "Model");
    fixtures::AddPath(definitions, 2, 1, "attn");
    fixtures::AddPath(definitions, 3, 1, "mlp");
    fixtures::AddString(definitions, 1, "_Z9attentionPf");
    fixtures::AddString(definitions, 2, "_Z4gemmPfS_i");
    Range(definitions, 2, 101, 100, 0, 10);
    Range(definitions, 3, 102, 100, 20, 10);
    Range(definitions, 1, 100, 0, 0, 40);
    Commit(definitions);

    v1::Batch first;
    Kernel(first, 2, 101, 1, 1000, 300);  // attn: 1000..1300
    Kernel(first, 3, 102, 2, 1400, 200);  // mlp: 1400..1600
    Commit(first);
    v1::Batch second;
    Kernel(second, 3, 102, 2, 1550, 250);  // mlp again, overlapping: 1550..1800
    Memory(second, 3, v1::ACTIVITY_KIND_MEMCPY, 1900, 40, 1 << 20);
    Memory(second, 0, v1::ACTIVITY_KIND_MEMSET, 2000, 4, 256);
    Kernel(second, 1, 0, 2, 3000, 10);  // a graph replay captured in Model: no occurrence...
    second.mutable_kernels()->rbegin()->set_graph_id(1);  // ...of a range, one of its own
    Commit(second);
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<RankStore> store_;
  int64_t sid_ = 0;
  uint64_t seq_ = 0;
  bool known_path_ = false;
};

TEST_F(KernelReportTest, ModulesShowKernelsSpanBusyAndMemoryApart) {
  CommitOneStep();
  const v1::Report report = Report();

  const v1::ModuleStats& attn = FindModule(report, "Model/attn");
  EXPECT_EQ(attn.kernels(), 1u);
  EXPECT_EQ(attn.gpu_time_ns(), 300);
  EXPECT_EQ(attn.gpu_span_ns(), 300);
  EXPECT_EQ(attn.gpu_busy_ns(), 300);

  const v1::ModuleStats& mlp = FindModule(report, "Model/mlp");
  EXPECT_EQ(mlp.kernels(), 2u);
  EXPECT_EQ(mlp.gpu_time_ns(), 450);
  EXPECT_EQ(mlp.gpu_span_ns(), 400);  // 1400..1800 across two batches
  EXPECT_EQ(mlp.gpu_busy_ns(), 400);  // the 50 ns overlap counted once
  EXPECT_EQ(mlp.memcpy_count(), 1u);
  EXPECT_EQ(mlp.memcpy_bytes(), 1u << 20);
  EXPECT_EQ(mlp.memcpy_time_ns(), 40);

  const v1::ModuleStats& model = FindModule(report, "Model");
  EXPECT_EQ(model.kernels(), 4u);  // inclusive: attn, mlp x2, the graph replay
  EXPECT_EQ(model.gpu_time_ns(), 760);
  // The step occurrence spans 1000..1800 (its children); the graph replay is an occurrence of
  // its own (10 ns).
  EXPECT_EQ(model.gpu_span_ns(), 800 + 10);
  EXPECT_EQ(model.gpu_busy_ns(), 700 + 10);
  EXPECT_EQ(model.memcpy_count(), 1u);

  const v1::ModuleStats& unattributed = FindModule(report, kUnattributedPath);
  EXPECT_EQ(unattributed.kernels(), 0u);
  EXPECT_FALSE(unattributed.has_gpu_time_ns());
  EXPECT_EQ(unattributed.memset_count(), 1u);
  EXPECT_EQ(unattributed.memset_bytes(), 256u);
  EXPECT_EQ(report.top_kernels_size(), 0);  // only on request
}

// Model (occurrence 100) whose own range event never comes (the process died inside it, or a
// producer named a parent it never sent): attn still counts, as a root would, and nothing of it
// goes to a module without a name.
TEST_F(KernelReportTest, AnOccurrenceWhoseParentNeverCameCountsOnItsOwn) {
  v1::Batch batch;
  fixtures::AddPath(batch, 1, 0, "Model");
  fixtures::AddPath(batch, 2, 1, "attn");
  fixtures::AddString(batch, 1, "_Z9attentionPf");
  Range(batch, 2, 101, 100, 0, 10);
  Kernel(batch, 2, 101, 1, 1000, 300);
  Commit(batch);
  const v1::Report report = Report();

  const v1::ModuleStats& attn = FindModule(report, "Model/attn");
  EXPECT_EQ(attn.calls(), 1u);
  EXPECT_EQ(attn.gpu_span_ns(), 300);
  EXPECT_EQ(attn.gpu_busy_ns(), 300);
  for (const v1::ModuleStats& module : report.modules()) {
    EXPECT_FALSE(module.path().empty()) << "a span without a module";
    if (module.path() == "Model") {
      EXPECT_EQ(module.gpu_span_ns(), 0) << "Model never closed";
    }
  }
}

TEST_F(KernelReportTest, TopKernelsOfAModuleIncludeItsDescendantsDemangled) {
  CommitOneStep();
  const v1::Report report = Report("Model");
  EXPECT_TRUE(known_path_);
  EXPECT_EQ(report.top_kernels_of(), "Model");
  ASSERT_EQ(report.top_kernels_size(), 3);
  EXPECT_EQ(report.top_kernels(0).name(), "_Z4gemmPfS_i");
  EXPECT_EQ(report.top_kernels(0).demangled(), "gemm(float*, float*, int)");
  EXPECT_EQ(report.top_kernels(0).count(), 3u);
  EXPECT_EQ(report.top_kernels(0).total_ns(), 460);
  EXPECT_EQ(report.top_kernels(0).min_ns(), 10);
  EXPECT_EQ(report.top_kernels(0).max_ns(), 250);
  EXPECT_EQ(report.top_kernels(1).demangled(), "attention(float*)");
  EXPECT_EQ(report.top_kernels(2).name(), "[memcpy]");
  EXPECT_EQ(report.top_kernels(2).kind(), v1::ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(report.top_kernels(2).bytes(), 1u << 20);
}

TEST_F(KernelReportTest, TopKernelsOfASubmoduleTheWholeJobOrTheUnattributed) {
  CommitOneStep();
  const v1::Report attn = Report("Model/attn");
  ASSERT_EQ(attn.top_kernels_size(), 1);
  EXPECT_EQ(attn.top_kernels(0).name(), "_Z9attentionPf");
  const v1::Report all = Report("/");
  EXPECT_EQ(all.top_kernels_size(), 3);  // limited to the 3 asked for, of 4 groups
  const v1::Report none = Report(kUnattributedPath);
  ASSERT_EQ(none.top_kernels_size(), 1);
  EXPECT_EQ(none.top_kernels(0).name(), "[memset]");
  Report("Model/att");  // a prefix of a name is not a module
  EXPECT_FALSE(known_path_);
}

TEST_F(KernelReportTest, DevicesAndTracingStatusComeFromTheInjectorsMetadata) {
  v1::Batch batch;
  fixtures::AddMetadata(batch, "gpu.status", "tracing kernels with CUPTI 13.0.1");
  fixtures::AddMetadata(batch, "gpu.0.name", "NVIDIA H100 80GB HBM3");
  fixtures::AddMetadata(batch, "gpu.0.chip", "GH100");
  Commit(batch);
  const v1::Report report = Report();
  ASSERT_EQ(report.ranks_size(), 1);
  EXPECT_EQ(report.ranks(0).gpu_status(), "tracing kernels with CUPTI 13.0.1");
  ASSERT_EQ(report.ranks(0).devices_size(), 1);
  EXPECT_EQ(report.ranks(0).devices(0).chip(), "GH100");
}

}  // namespace
}  // namespace flopscope::daemon
