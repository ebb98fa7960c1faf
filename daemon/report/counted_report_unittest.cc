// Counted FLOPs from the store to the Report (issue 4): two ranks written through RankStore, read
// back by RankReader and built by ReportBuilder, every figure checked by hand below.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/flop_formulas.h"
#include "daemon/query/rank_reader.h"
#include "daemon/report/report_builder.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_reports.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using fixtures::FindModule;

using fixtures::AddKernel;
using fixtures::AddKernelFlops;
using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::AddString;
using fixtures::AddWindow;

// Path ids, the same on both ranks: model / {layer, attn, head}; step / {forward, backward}.
constexpr uint64_t kModel = 1, kLayer = 2, kAttn = 3, kHead = 4;
constexpr uint64_t kStep = 5, kForward = 6, kBackward = 7;
constexpr char kTensorBf16[] = "tensor:bf16_dst_fp32";

v1::Batch Definitions() {
  v1::Batch batch;
  batch.set_seq(1);
  AddString(batch, 1, "gemm");
  AddPath(batch, kModel, 0, "model");
  AddPath(batch, kLayer, kModel, "layer");
  AddPath(batch, kAttn, kModel, "attn");
  AddPath(batch, kHead, kModel, "head");
  AddPath(batch, kStep, 0, "step", "flopscope");
  AddPath(batch, kForward, kStep, "forward", "flopscope");
  AddPath(batch, kBackward, kStep, "backward", "flopscope");
  return batch;
}

v1::FlopCounters* Counted(v1::Batch& batch, uint64_t path, int64_t step, uint64_t phase) {
  return AddKernelFlops(batch, path, 1, step, phase)->mutable_flops();
}

void AddTensor(v1::FlopCounters* flops, double value) {
  v1::FlopCounters::Tensor* tensor = flops->add_tensor();
  tensor->set_source("bf16_dst_fp32");
  tensor->set_flops(value);
}

// Rank 0 ran steps 0-3 and counted steps 1 and 2. Each counted step: in forward, a layer kernel
// (1000 fp32 + 3000 tensor) and an attn kernel (800 tensor); in backward, a layer kernel (2000
// fp32). Uncounted steps 0 and 3 take 1000 and 1200 ns with a 300 ns layer kernel each; the
// counted steps took 9000 ns, with a 5000 ns layer kernel, and must not show anywhere.
v1::Batch Rank0() {
  v1::Batch batch = Definitions();
  AddRange(batch, kStep, 0, 1000);
  AddKernel(batch, kLayer, 1, 100, 300);
  for (int64_t step : {1, 2}) {
    AddRange(batch, kStep, step * 10'000, 9000)->set_counted(true);
    AddKernel(batch, kLayer, 1, step * 10'000 + 100, 5000)->set_counted(true);
    v1::FlopCounters* layer_fwd = Counted(batch, kLayer, step, kForward);
    layer_fwd->set_fp32(1000);
    AddTensor(layer_fwd, 3000);
    AddTensor(Counted(batch, kAttn, step, kForward), 800);
    Counted(batch, kLayer, step, kBackward)->set_fp32(2000);
  }
  AddRange(batch, kStep, 30'000, 1200);
  AddKernel(batch, kLayer, 1, 30'100, 300);
  v1::CounterWindowRecord* window = AddWindow(batch, 1, 2, 10'000, 20'000);
  window->set_kernels_counted(6);
  return batch;
}

// Rank 1 counted its step 5 only: layer 500 fp32 in forward, attn 100 fp64 in backward, head 40
// fp32 in forward; one uncounted step of 1100 ns with a 400 ns layer kernel.
v1::Batch Rank1() {
  v1::Batch batch = Definitions();
  AddRange(batch, kStep, 0, 1100);
  AddKernel(batch, kLayer, 1, 100, 400);
  Counted(batch, kLayer, 5, kForward)->set_fp32(500);
  Counted(batch, kAttn, 5, kBackward)->set_fp64(100);
  Counted(batch, kHead, 5, kForward)->set_fp32(40);
  v1::CounterWindowRecord* window = AddWindow(batch, 5, 5, 50'000, 9000);
  window->set_kernels_counted(3);
  window->set_ranges_unmatched(1);
  return batch;
}

class CountedReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const v1::Batch batches[] = {Rank0(), Rank1()};
    for (int32_t rank = 0; rank < 2; ++rank) {
      const std::string path = dir_.File("rank-" + std::to_string(rank) + ".sqlite");
      {
        absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path);
        ASSERT_TRUE(store.ok()) << store.status();
        absl::StatusOr<SessionHandle> session =
            (*store)->OpenSession(fixtures::Hello("job", rank, "session-" + std::to_string(rank)));
        ASSERT_TRUE(session.ok()) << session.status();
        const absl::Status status = (*store)->Commit(session->sid, batches[rank]);
        ASSERT_TRUE(status.ok()) << status;
      }
      absl::StatusOr<RankSnapshot> snapshot = RankReader::Read(path);
      ASSERT_TRUE(snapshot.ok()) << snapshot.status();
      snapshots_[rank] = *std::move(snapshot);
    }
  }

  v1::Report Build(std::initializer_list<int32_t> ranks) const {
    ReportBuilder builder("job");
    for (int32_t rank : ranks) {
      v1::RankInfo info;
      info.set_rank(rank);
      builder.AddRank(info, snapshots_.at(rank));
    }
    return builder.Build();
  }

  static const v1::PhaseStats& Phase(const v1::Report& report, const std::string& name) {
    for (const v1::PhaseStats& phase : report.phases()) {
      if (phase.name() == name) return phase;
    }
    ADD_FAILURE() << "no phase " << name;
    static const v1::PhaseStats kNone;
    return kNone;
  }

  template <typename Row>
  static std::map<std::string, double> Precisions(const Row& row) {
    std::map<std::string, double> out;
    for (const v1::PrecisionFlops& entry : row.flops_by_precision()) {
      out[entry.precision()] = entry.flops();
    }
    return out;
  }

  fixtures::ScopedTempDir dir_;
  std::map<int32_t, RankSnapshot> snapshots_;
};

TEST_F(CountedReportTest, SnapshotsKnowTheirCountedSteps) {
  EXPECT_EQ(snapshots_.at(0).counted_steps, 2u);
  EXPECT_EQ(snapshots_.at(1).counted_steps, 1u);
}

TEST_F(CountedReportTest, ModuleFlopsArePerCountedStepSummedOverRanks) {
  const v1::Report report = Build({0, 1});
  // layer: rank 0 (1000 + 3000 + 2000) x 2 steps / 2 = 6000; rank 1: 500.
  const v1::ModuleStats& layer = FindModule(report, "model/layer");
  ASSERT_TRUE(layer.has_flops());
  EXPECT_DOUBLE_EQ(layer.flops(), 6500);
  EXPECT_EQ(Precisions(layer),
            (std::map<std::string, double>{{"fp32", 3000 + 500}, {kTensorBf16, 3000}}));
  EXPECT_EQ(layer.flops_by_precision(0).precision(), "fp32") << "largest first";
  EXPECT_EQ(layer.counted_steps(), 3u);
  EXPECT_EQ(layer.counted_kernels(), 5u);
  // attn: 800 + 100; head: only rank 1 counted it, so only its step counts.
  const v1::ModuleStats& attn = FindModule(report, "model/attn");
  EXPECT_DOUBLE_EQ(attn.flops(), 900);
  EXPECT_EQ(Precisions(attn), (std::map<std::string, double>{{"fp64", 100}, {kTensorBf16, 800}}));
  EXPECT_EQ(attn.counted_kernels(), 3u);
  const v1::ModuleStats& head = FindModule(report, "model/head");
  EXPECT_DOUBLE_EQ(head.flops(), 40);
  EXPECT_EQ(head.counted_steps(), 1u);
  // model: inclusive of its children.
  const v1::ModuleStats& model = FindModule(report, "model");
  EXPECT_DOUBLE_EQ(model.flops(), 6500 + 900 + 40);
  EXPECT_EQ(Precisions(model),
            (std::map<std::string, double>{{"fp32", 3540}, {"fp64", 100}, {kTensorBf16, 3800}}));
  EXPECT_EQ(model.counted_steps(), 3u);
  EXPECT_EQ(model.counted_kernels(), 9u);
}

// The H200's counted torch job (2026-11-26): a module's backward kernels run under its range
// too, so its FLOPs were forward + backward while DeepSpeed's tree shows forward. The daemon
// splits them by the pass range open at launch (kernel_flops.phase_path_id), tensor FLOPs
// included, per counted step and inclusive, like `flops`.
TEST_F(CountedReportTest, ModuleFlopsAreSplitByThePassTheyWereLaunchedIn) {
  EXPECT_EQ(snapshots_.at(0).path_phase_flops.size(), 3u);  // layer fwd, layer bwd, attn fwd
  const v1::Report report = Build({0, 1});
  // layer: forward rank 0 (1000 + 3000) x 2 / 2 + rank 1 500; backward rank 0 2000 x 2 / 2.
  const v1::ModuleStats& layer = FindModule(report, "model/layer");
  ASSERT_TRUE(layer.has_fwd_flops() && layer.has_bwd_flops());
  EXPECT_DOUBLE_EQ(layer.fwd_flops(), 4000 + 500);
  EXPECT_DOUBLE_EQ(layer.bwd_flops(), 2000);
  EXPECT_DOUBLE_EQ(layer.fwd_flops() + layer.bwd_flops(), layer.flops());
  // attn: 800 tensor in forward (rank 0), 100 fp64 in backward (rank 1).
  const v1::ModuleStats& attn = FindModule(report, "model/attn");
  EXPECT_DOUBLE_EQ(attn.fwd_flops(), 800);
  EXPECT_DOUBLE_EQ(attn.bwd_flops(), 100);
  // head ran in forward only: no backward figure at all.
  const v1::ModuleStats& head = FindModule(report, "model/head");
  EXPECT_DOUBLE_EQ(head.fwd_flops(), 40);
  EXPECT_FALSE(head.has_bwd_flops());
  // model: inclusive of its children, in each pass.
  const v1::ModuleStats& model = FindModule(report, "model");
  EXPECT_DOUBLE_EQ(model.fwd_flops(), 4500 + 800 + 40);
  EXPECT_DOUBLE_EQ(model.bwd_flops(), 2000 + 100);
}

TEST_F(CountedReportTest, LatencyComesFromUncountedRecordsOnly) {
  const v1::Report report = Build({0, 1});
  const v1::ModuleStats& layer = FindModule(report, "model/layer");
  EXPECT_EQ(layer.kernels(), 3u);
  EXPECT_EQ(layer.gpu_time_ns(), 300 + 300 + 400);
  const v1::PhaseStats& step = Phase(report, "step");
  EXPECT_EQ(step.calls(), 3u);
  EXPECT_EQ(step.cpu_time_ns(), 1000 + 1200 + 1100);
  EXPECT_EQ(step.min_ns(), 1000);
  EXPECT_EQ(step.max_ns(), 1200);
}

TEST_F(CountedReportTest, PhaseFlopsAreMeasuredAndStepsHoldTheirPhases) {
  const v1::Report report = Build({0, 1});
  const v1::PhaseStats& forward = Phase(report, "forward");
  ASSERT_TRUE(forward.has_flops());
  EXPECT_DOUBLE_EQ(forward.flops(), 4800 + 540);
  EXPECT_EQ(Precisions(forward),
            (std::map<std::string, double>{{"fp32", 1540}, {kTensorBf16, 3800}}));
  const v1::PhaseStats& backward = Phase(report, "backward");
  EXPECT_DOUBLE_EQ(backward.flops(), 2000 + 100);
  EXPECT_EQ(Precisions(backward), (std::map<std::string, double>{{"fp32", 2000}, {"fp64", 100}}));
  EXPECT_DOUBLE_EQ(Phase(report, "step").flops(), 6800 + 640);
}

TEST_F(CountedReportTest, OneRankAloneIsDividedByItsOwnSteps) {
  const v1::Report report = Build({0});
  EXPECT_DOUBLE_EQ(FindModule(report, "model/layer").flops(), 6000);
  EXPECT_EQ(FindModule(report, "model/layer").counted_steps(), 2u);
  EXPECT_FALSE(FindModule(report, "model/head").has_flops());
  EXPECT_FALSE(FindModule(report, "model/head").has_gpu_time_ns());
}

TEST_F(CountedReportTest, WindowsOfEveryIncludedRankAndTheFp16Convention) {
  const v1::Report report = Build({0, 1});
  ASSERT_EQ(report.counter_windows_size(), 2);
  EXPECT_EQ(report.counter_windows(0).rank(), 0);
  EXPECT_EQ(report.counter_windows(0).window().first_step(), 1);
  EXPECT_EQ(report.counter_windows(0).window().last_step(), 2);
  EXPECT_EQ(report.counter_windows(0).window().kernels_counted(), 6u);
  EXPECT_EQ(report.counter_windows(1).rank(), 1);
  EXPECT_EQ(report.counter_windows(1).window().ranges_unmatched(), 1u);
  EXPECT_EQ(report.counter_windows(1).window().chip(), "GH100");
  EXPECT_EQ(report.fp16_convention(), kFp16Convention);
  EXPECT_EQ(Build({1}).counter_windows_size(), 1);
}

}  // namespace
}  // namespace flopscope::daemon
