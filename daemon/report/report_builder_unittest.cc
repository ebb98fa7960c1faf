#include "daemon/report/report_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "daemon/testing/test_reports.h"

namespace flopscope::daemon {
namespace {

using fixtures::FindModule;
using ::testing::ElementsAre;

// Builds a rank snapshot the way a rank file would hold it.
class SnapshotBuilder {
 public:
  SnapshotBuilder& Path(int64_t sid, uint64_t id, uint64_t parent, const std::string& name,
                        const std::string& domain = "") {
    snapshot_.paths.push_back({sid, id, parent, domain, name});
    return *this;
  }
  SnapshotBuilder& Calls(int64_t sid, uint64_t path, uint64_t calls, int64_t cpu_ns,
                         int64_t min_ns = 0, int64_t max_ns = 0) {
    SelfStats& stats = Row(sid, path);
    stats.calls += calls;
    stats.cpu_time_ns += cpu_ns;
    stats.min_ns = min_ns;
    stats.max_ns = max_ns;
    return *this;
  }
  SnapshotBuilder& Kernels(int64_t sid, uint64_t path, uint64_t kernels, int64_t gpu_ns,
                           std::optional<double> flops = std::nullopt) {
    SelfStats& stats = Row(sid, path);
    stats.kernels += kernels;
    stats.gpu_time_ns += gpu_ns;
    if (flops) {
      stats.flops += *flops;
      stats.has_flops = true;
    }
    return *this;
  }
  SnapshotBuilder& Meta(const std::string& key, const std::string& value) {
    v1::Metadata& entry = snapshot_.metadata.emplace_back();
    entry.set_key(key);
    entry.set_value(value);
    return *this;
  }
  SnapshotBuilder& Loss(v1::LossCause cause, uint64_t records) {
    snapshot_.losses[cause] += records;
    return *this;
  }
  const RankSnapshot& snapshot() const { return snapshot_; }

 private:
  SelfStats& Row(int64_t sid, uint64_t path) {
    for (RankSnapshot::PathStats& row : snapshot_.stats) {
      if (row.sid == sid && row.path_id == path) return row.stats;
    }
    snapshot_.stats.push_back({sid, path, SelfStats{}});
    return snapshot_.stats.back().stats;
  }

  RankSnapshot snapshot_;
};

v1::RankInfo Rank(int32_t rank) {
  v1::RankInfo info;
  info.set_rank(rank);
  return info;
}

std::vector<std::string> Paths(const v1::Report& report) {
  std::vector<std::string> paths;
  for (const v1::ModuleStats& module : report.modules()) paths.push_back(module.path());
  return paths;
}

// model / encoder / {layer.0, layer.1}, with kernels at three levels.
SnapshotBuilder ModelTree() {
  SnapshotBuilder b;
  b.Path(1, 1, 0, "model")
      .Path(1, 2, 1, "encoder")
      .Path(1, 3, 2, "layer.0")
      .Path(1, 4, 2, "layer.1");
  b.Calls(1, 1, 1, 10'000).Calls(1, 2, 1, 9'000).Calls(1, 3, 2, 4'000).Calls(1, 4, 2, 3'000);
  b.Kernels(1, 3, 2, 300).Kernels(1, 4, 1, 100).Kernels(1, 2, 1, 50);
  return b;
}

TEST(ReportBuilderTest, KernelFiguresIncludeDescendantsCallsDoNot) {
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), ModelTree().snapshot());
  const v1::Report report = builder.Build();
  EXPECT_THAT(Paths(report), ElementsAre("model", "model/encoder", "model/encoder/layer.0",
                                         "model/encoder/layer.1"));
  const v1::ModuleStats& model = FindModule(report, "model");
  EXPECT_EQ(model.depth(), 0u);
  EXPECT_EQ(model.name(), "model");
  EXPECT_EQ(model.calls(), 1u);
  EXPECT_EQ(model.cpu_time_ns(), 10'000);
  EXPECT_EQ(model.kernels(), 4u);
  EXPECT_EQ(model.gpu_time_ns(), 450);
  const v1::ModuleStats& encoder = FindModule(report, "model/encoder");
  EXPECT_EQ(encoder.depth(), 1u);
  EXPECT_EQ(encoder.kernels(), 4u);
  const v1::ModuleStats& layer0 = FindModule(report, "model/encoder/layer.0");
  EXPECT_EQ(layer0.depth(), 2u);
  EXPECT_EQ(layer0.name(), "layer.0");
  EXPECT_EQ(layer0.calls(), 2u);
  EXPECT_EQ(layer0.kernels(), 2u);
  EXPECT_EQ(layer0.gpu_time_ns(), 300);
  EXPECT_FALSE(model.has_flops());
  EXPECT_FALSE(model.has_params());
}

TEST(ReportBuilderTest, OptionalFiguresAreAbsentWhereUnknown) {
  SnapshotBuilder b = ModelTree();
  b.Path(1, 5, 1, "head").Calls(1, 5, 1, 500);  // no kernels anywhere below
  b.Kernels(1, 4, 1, 10, 2.0e9);                // counters in layer.1 only
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), b.snapshot());
  const v1::Report report = builder.Build();
  EXPECT_FALSE(FindModule(report, "model/head").has_gpu_time_ns());
  EXPECT_EQ(FindModule(report, "model/head").kernels(), 0u);
  EXPECT_FALSE(FindModule(report, "model/encoder/layer.0").has_flops());
  EXPECT_DOUBLE_EQ(FindModule(report, "model/encoder/layer.1").flops(), 2.0e9);
  EXPECT_DOUBLE_EQ(FindModule(report, "model").flops(), 2.0e9);
}

TEST(ReportBuilderTest, MergesRanksAndSessionsByPathInFirstSeenOrder) {
  // Rank 1 interned the same modules under other ids, in another order, and has one more.
  SnapshotBuilder other;
  other.Path(1, 7, 0, "model").Path(1, 8, 7, "decoder").Path(1, 9, 7, "encoder");
  other.Calls(1, 9, 1, 1'000).Kernels(1, 9, 5, 500).Kernels(1, 8, 1, 10);
  // A second session of rank 1 (a restart) reuses ids with other meanings.
  other.Path(2, 1, 0, "model").Path(2, 2, 1, "encoder").Kernels(2, 2, 1, 1);
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), ModelTree().snapshot());
  builder.AddRank(Rank(1), other.snapshot());
  const v1::Report report = builder.Build();
  EXPECT_THAT(Paths(report), ElementsAre("model", "model/encoder", "model/encoder/layer.0",
                                         "model/encoder/layer.1", "model/decoder"));
  EXPECT_EQ(FindModule(report, "model/encoder").calls(), 2u);
  EXPECT_EQ(FindModule(report, "model/encoder").kernels(), 4u + 5u + 1u);
  EXPECT_EQ(FindModule(report, "model/encoder").gpu_time_ns(), 450 + 500 + 1);
  EXPECT_EQ(FindModule(report, "model").kernels(), 4u + 5u + 1u + 1u);
  ASSERT_EQ(report.ranks_size(), 2);
  EXPECT_EQ(report.ranks(1).rank(), 1);
}

TEST(ReportBuilderTest, ParamsComeFromMetadataLastValuePerRankSummedOverShards) {
  SnapshotBuilder rank0 = ModelTree();
  rank0.Meta("params model/encoder", "1000").Meta("params model/encoder", "1500");
  rank0.Meta("params model", "not a number").Meta("batch_size", "8");
  SnapshotBuilder rank1 = ModelTree();
  rank1.Meta("params model/encoder", "500");
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), rank0.snapshot());
  builder.AddRank(Rank(1), rank1.snapshot());
  const v1::Report report = builder.Build();
  EXPECT_EQ(FindModule(report, "model/encoder").params(), 2000u);
  EXPECT_FALSE(FindModule(report, "model").has_params());
  EXPECT_EQ(report.metadata_size(), 5);
  EXPECT_EQ(report.metadata(3).key(), "batch_size");
}

TEST(ReportBuilderTest, ModuleKeysEveryRankAnnouncedAlikeComeOnce) {
  // 64 data-parallel ranks announce the same tree: 50 entries each in the load test's job, the
  // report's 180 kB. Per-module keys with one value come once; the rest as announced.
  ReportBuilder builder("job");
  for (int32_t rank = 0; rank < 4; ++rank) {
    SnapshotBuilder snapshot = ModelTree();
    snapshot.Meta("module model", "0").Meta("module model/encoder", "1 model");
    snapshot.Meta("class model/encoder", "Encoder").Meta("batch_size", "8");
    snapshot.Meta("params model/encoder", rank < 2 ? "300" : "700");  // two shard sizes
    snapshot.Meta("kernels.launch_not_seen", std::to_string(rank));   // a per-rank running total
    builder.AddRank(Rank(rank), snapshot.snapshot());
  }
  const v1::Report report = builder.Build();
  std::vector<std::string> entries;
  for (const v1::Metadata& entry : report.metadata()) {
    entries.push_back(entry.key() + "=" + entry.value());
  }
  EXPECT_EQ(entries,
            (std::vector<std::string>{
                "module model=0", "module model/encoder=1 model", "class model/encoder=Encoder",
                "batch_size=8", "params model/encoder=300", "kernels.launch_not_seen=0",
                "batch_size=8", "params model/encoder=300", "kernels.launch_not_seen=1",
                "batch_size=8", "params model/encoder=700", "kernels.launch_not_seen=2",
                "batch_size=8", "params model/encoder=700", "kernels.launch_not_seen=3"}));
  // The figures built from them are those of the whole list.
  EXPECT_EQ(FindModule(report, "model/encoder").params(), 300u + 300u + 700u + 700u);
}

TEST(ReportBuilderTest, ParamsCountOneDataParallelReplicaWhoseShardsAddUp) {
  // tp 2 x dp 2: ranks 0 and 1 are the two tensor-parallel halves of replica 0; ranks 2 and 3
  // hold the same halves again in replica 1 and must not double the model.
  ReportBuilder builder("job");
  const uint64_t shard[] = {300, 700, 300, 700};
  for (int32_t rank = 0; rank < 4; ++rank) {
    v1::RankInfo info = Rank(rank);
    info.mutable_layout()->set_tp_size(2);
    info.mutable_layout()->set_dp_size(2);
    info.mutable_layout()->set_tp_rank(rank % 2);
    info.mutable_layout()->set_dp_rank(rank / 2);
    SnapshotBuilder snapshot = ModelTree();
    snapshot.Meta("params model/encoder", std::to_string(shard[rank]));
    builder.AddRank(info, snapshot.snapshot());
  }
  EXPECT_EQ(FindModule(builder.Build(), "model/encoder").params(), 300u + 700u);
}

TEST(ReportBuilderTest, FlopscopeRangesArePhasesNotModules) {
  SnapshotBuilder b;
  b.Path(1, 1, 0, "step", "flopscope").Path(1, 2, 1, "forward", "flopscope");
  b.Path(1, 3, 2, "model").Path(1, 4, 1, "optimizer", "flopscope");
  b.Calls(1, 1, 2, 3'000, 1'000, 2'000).Calls(1, 2, 2, 1'200, 500, 700).Calls(1, 3, 2, 1'000);
  b.Kernels(1, 3, 4, 400).Kernels(1, 2, 1, 5);  // the kernel in `forward` outside any module
  b.Calls(1, 4, 2, 600, 250, 350).Kernels(1, 4, 2, 60);
  SnapshotBuilder rank1;
  rank1.Path(1, 1, 0, "step", "flopscope").Calls(1, 1, 1, 4'000, 4'000, 4'000);
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), b.snapshot());
  builder.AddRank(Rank(1), rank1.snapshot());
  const v1::Report report = builder.Build();

  EXPECT_THAT(Paths(report), ElementsAre("model", "<unattributed>"));
  EXPECT_EQ(FindModule(report, "model").depth(), 0u);
  EXPECT_EQ(FindModule(report, "model").kernels(), 4u);
  EXPECT_EQ(FindModule(report, "<unattributed>").kernels(), 3u);
  EXPECT_EQ(FindModule(report, "<unattributed>").gpu_time_ns(), 65);

  ASSERT_EQ(report.phases_size(), 3);
  const v1::PhaseStats& step = report.phases(0);
  EXPECT_EQ(step.name(), "step");
  EXPECT_EQ(step.calls(), 3u);
  EXPECT_EQ(step.cpu_time_ns(), 7'000);
  EXPECT_EQ(step.min_ns(), 1'000);
  EXPECT_EQ(step.max_ns(), 4'000);
  EXPECT_EQ(report.phases(1).name(), "forward");
  EXPECT_EQ(report.phases(2).name(), "optimizer");
  EXPECT_EQ(report.phases(2).min_ns(), 250);
}

TEST(ReportBuilderTest, UnattributedRowOnlyWhenThereAreSuch) {
  ReportBuilder without("job");
  without.AddRank(Rank(0), ModelTree().snapshot());
  EXPECT_THAT(Paths(without.Build()), ::testing::Not(::testing::Contains("<unattributed>")));

  SnapshotBuilder b = ModelTree();
  b.Kernels(1, 0, 3, 90, 1e6);
  ReportBuilder with("job");
  with.AddRank(Rank(0), b.snapshot());
  const v1::Report report = with.Build();
  ASSERT_EQ(report.modules().rbegin()->path(), "<unattributed>");
  const v1::ModuleStats& row = *report.modules().rbegin();
  EXPECT_EQ(row.kernels(), 3u);
  EXPECT_EQ(row.gpu_time_ns(), 90);
  EXPECT_DOUBLE_EQ(row.flops(), 1e6);
  EXPECT_EQ(FindModule(report, "model").kernels(), 4u);  // not counted under any module
}

TEST(ReportBuilderTest, LossesAreSummedPerCause) {
  SnapshotBuilder a = ModelTree();
  a.Loss(v1::LOSS_CAUSE_BUFFER_FULL, 3).Loss(v1::LOSS_CAUSE_CUPTI_DROPPED, 1);
  SnapshotBuilder b;
  b.Loss(v1::LOSS_CAUSE_BUFFER_FULL, 4);
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), a.snapshot());
  builder.AddRank(Rank(1), b.snapshot());
  const v1::Report report = builder.Build();
  ASSERT_EQ(report.losses_size(), 2);
  EXPECT_EQ(report.losses(0).cause(), v1::LOSS_CAUSE_BUFFER_FULL);
  EXPECT_EQ(report.losses(0).records(), 7u);
  EXPECT_EQ(report.losses(1).records(), 1u);
  EXPECT_EQ(report.job_id(), "job");
}

TEST(ReportBuilderTest, DamagedPathTablesDoNotHangOrCrash) {
  SnapshotBuilder b;
  b.Path(1, 1, 2, "a").Path(1, 2, 1, "b");  // a cycle, which the validator never lets in
  b.Path(1, 3, 99, "orphan").Kernels(1, 1, 1, 10).Kernels(1, 42, 1, 10);
  ReportBuilder builder("job");
  builder.AddRank(Rank(0), b.snapshot());
  const v1::Report report = builder.Build();
  EXPECT_GE(report.modules_size(), 1);
}

}  // namespace
}  // namespace flopscope::daemon
