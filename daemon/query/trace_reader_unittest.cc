// The raw trace of a rank file (Query.GetTrace's reader): every record once, flows counted from
// both ends, the flow cap counted, chunks bounded, the step window and counted FLOPs.
#include "daemon/query/trace_reader.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "daemon/query/rank_reader.h"
#include "daemon/store/rank_store.h"
#include "daemon/store/step_folding.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using fixtures::AddKernel;
using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::AddString;
using fixtures::BaseNs;

class TraceReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<SessionHandle> session =
        store_->OpenSession(fixtures::Hello("job-1", 0, "node-1-4242-1"));
    ASSERT_TRUE(session.ok()) << session.status();
    sid_ = session->sid;
    batch_.set_seq(1);
    AddString(batch_, 1, "sgemm");
    AddPath(batch_, 1, 0, "model");
    AddPath(batch_, 2, 1, "layer");
    AddPath(batch_, 3, 0, "step", "flopscope");
  }

  // `count` kernels launched in `range` (nullptr: with no range open) from `offset` on.
  void Launch(const v1::RangeEvent* range, int count, int64_t offset) {
    for (int i = 0; i < count; ++i) {
      v1::KernelRecord* kernel =
          AddKernel(batch_, range ? range->path_id() : 0, 1, offset + i * 10, 5);
      if (range != nullptr) kernel->set_range_instance_id(range->instance_id());
    }
  }

  std::vector<v1::TraceChunk> Read(const TraceWindow& window = {}) {
    EXPECT_TRUE(store_->Commit(sid_, batch_).ok());
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    std::vector<v1::TraceChunk> chunks;
    absl::Status status = ReadRankTrace(**db, 0, window, [&](v1::TraceChunk chunk) {
      chunks.push_back(std::move(chunk));
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    return chunks;
  }

  fixtures::ScopedTempDir dir_;
  const std::string path_ = dir_.File("rank-00000.sqlite");
  std::unique_ptr<RankStore> store_;
  int64_t sid_ = 0;
  v1::Batch batch_;
};

TEST_F(TraceReaderTest, EveryRecordOnceAndFlowsCountedFromBothEnds) {
  const v1::RangeEvent model = *AddRange(batch_, 1, 0, 10'000);
  const v1::RangeEvent layer = *AddRange(batch_, 2, 100, 5000);
  Launch(&layer, 3, 200);
  Launch(&model, 1, 6000);
  Launch(nullptr, 2, 20'000);
  const std::vector<v1::TraceChunk> chunks = Read();
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0].session().session_id(), "node-1-4242-1");
  EXPECT_EQ(chunks[0].paths_size(), 3);
  EXPECT_EQ(chunks[0].strings_size(), 1);
  std::map<uint64_t, uint32_t> flows;  // instance -> flows
  std::map<uint64_t, std::set<uint32_t>> ordinals;
  std::set<uint64_t> keys;
  int unlinked = 0;
  for (const v1::TraceChunk& chunk : chunks) {
    EXPECT_EQ(chunk.session_index(), sid_);
    for (const v1::TraceRange& range : chunk.ranges()) {
      EXPECT_TRUE(flows.emplace(range.event().instance_id(), range.flows()).second);
    }
    for (const v1::TraceActivity& activity : chunk.activities()) {
      EXPECT_TRUE(keys.insert(activity.key()).second) << "activity twice";
      if (!activity.flow()) {
        ++unlinked;
        continue;
      }
      EXPECT_TRUE(
          ordinals[activity.kernel().range_instance_id()].insert(activity.launch_ordinal()).second);
    }
  }
  EXPECT_EQ(flows,
            (std::map<uint64_t, uint32_t>{{model.instance_id(), 1}, {layer.instance_id(), 3}}));
  EXPECT_EQ(ordinals[layer.instance_id()], (std::set<uint32_t>{0, 1, 2}));
  EXPECT_EQ(ordinals[model.instance_id()], (std::set<uint32_t>{0}));
  EXPECT_EQ(keys.size(), static_cast<size_t>(batch_.kernels_size()));
  EXPECT_EQ(unlinked, 2);
}

TEST_F(TraceReaderTest, ChunksStayBoundedAndFlowsPastTheCapAreCounted) {
  const v1::RangeEvent layer = *AddRange(batch_, 2, 0, 100'000'000);
  const int kernels = static_cast<int>(kMaxFlowsPerRange) + 3;
  Launch(&layer, kernels, 10);
  const std::vector<v1::TraceChunk> chunks = Read();
  ASSERT_GE(chunks.size(), 2u);
  uint64_t with_flow = 0, activities = 0;
  for (const v1::TraceChunk& chunk : chunks) {
    EXPECT_LE(static_cast<size_t>(chunk.ranges_size() + chunk.activities_size() +
                                  chunk.paths_size() + chunk.strings_size()),
              kTraceChunkRecords);
    activities += chunk.activities_size();
    for (const v1::TraceActivity& activity : chunk.activities()) with_flow += activity.flow();
    for (const v1::TraceRange& range : chunk.ranges()) EXPECT_EQ(range.flows(), kMaxFlowsPerRange);
  }
  EXPECT_EQ(activities, static_cast<uint64_t>(kernels));
  EXPECT_EQ(with_flow, kMaxFlowsPerRange);
  EXPECT_EQ(chunks.back().flows_left_out(), kernels - kMaxFlowsPerRange);
}

TEST_F(TraceReaderTest, AStepWindowKeepsWhatOverlapsItsSteps) {
  for (int step = 0; step < 3; ++step) AddRange(batch_, 3, step * 2000, 1000);
  const v1::RangeEvent inside = *AddRange(batch_, 1, 2100, 500);
  AddRange(batch_, 1, 4100, 500);  // in step 2
  Launch(&inside, 1, 2200);
  ASSERT_TRUE(store_->Commit(sid_, batch_).ok());
  batch_.Clear();
  batch_.set_seq(2);
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(path_);
  ASSERT_TRUE(db.ok());
  absl::StatusOr<std::optional<TraceWindow>> window = StepTimeWindow(**db, {1, 1});
  ASSERT_TRUE(window.ok() && window->has_value());
  EXPECT_EQ((*window)->first_ns, BaseNs() + 2000);
  EXPECT_EQ((*window)->last_ns, BaseNs() + 3000);
  absl::StatusOr<std::optional<TraceWindow>> past = StepTimeWindow(**db, {3, std::nullopt});
  ASSERT_TRUE(past.ok());
  EXPECT_FALSE(past->has_value());
  std::set<int64_t> starts;
  uint64_t activities = 0;
  for (const v1::TraceChunk& chunk : Read(**window)) {
    for (const v1::TraceRange& range : chunk.ranges()) starts.insert(range.event().start_ns());
    activities += chunk.activities_size();
  }
  EXPECT_EQ(starts, (std::set<int64_t>{BaseNs() + 2000, inside.start_ns()}));
  EXPECT_EQ(activities, 1u);
}

TEST_F(TraceReaderTest, FoldedStepsKeepTheirNumbersAndTheTraceSaysWhatFoldingTook) {
  constexpr int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    AddRange(batch_, 3, step * 2000, 1000);
    Launch(&*AddRange(batch_, 1, step * 2000 + 100, 500), 1, step * 2000 + 200);
  }
  ASSERT_TRUE(store_->Commit(sid_, batch_).ok());
  batch_.Clear();
  batch_.set_seq(2);
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(path_);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<FoldOutcome> fold = StepFolder::Fold(**db, FoldPolicy{/*keep_raw_steps=*/1});
  ASSERT_TRUE(fold.ok()) << fold.status();
  ASSERT_GT(fold->horizon_ns, 0);
  uint64_t folded_events = 0;
  ASSERT_TRUE(ForEachFoldedRange(**db, [&](const FoldedRange&) { ++folded_events; }).ok());
  ASSERT_GT(folded_events, 0u);
  // Step 3 is still step 3 (the newest, kept raw), not step 0 of what is left raw.
  absl::StatusOr<std::optional<TraceWindow>> last = StepTimeWindow(**db, {kSteps - 1, kSteps - 1});
  ASSERT_TRUE(last.ok() && last->has_value()) << last.status();
  EXPECT_EQ((*last)->first_ns, BaseNs() + (kSteps - 1) * 2000);
  // A window over folded steps: their events are counted as folded, none comes out raw.
  absl::StatusOr<std::optional<TraceWindow>> first = StepTimeWindow(**db, {0, 1});
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  const std::vector<v1::TraceChunk> chunks = Read(**first);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0].folded_range_events(), folded_events);
  for (const v1::TraceChunk& chunk : chunks) EXPECT_EQ(chunk.ranges_size(), 0);
  // The whole file: folded events counted once, on the rank's first chunk only.
  batch_.set_seq(3);
  const std::vector<v1::TraceChunk> all = Read();
  EXPECT_EQ(all[0].folded_range_events(), folded_events);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].folded_range_events(), 0u);
}

TEST_F(TraceReaderTest, CountedFlopsRideOnTheirKernelAndAStopIsCancelled) {
  const v1::RangeEvent layer = *AddRange(batch_, 2, 0, 1000);
  Launch(&layer, 2, 100);
  v1::KernelFlops* counted = fixtures::AddKernelFlops(batch_, 2, 1, -1);
  counted->set_correlation_id(batch_.kernels(1).correlation_id());
  counted->mutable_flops()->set_fp32(3e6);
  uint64_t with_flops = 0;
  for (const v1::TraceChunk& chunk : Read()) {
    for (const v1::TraceActivity& activity : chunk.activities()) {
      if (!activity.has_flops()) continue;
      ++with_flops;
      EXPECT_EQ(activity.kernel().correlation_id(), batch_.kernels(1).correlation_id());
      EXPECT_EQ(activity.flops().fp32(), 3e6);
    }
  }
  EXPECT_EQ(with_flops, 1u);
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(path_);
  ASSERT_TRUE(db.ok());
  EXPECT_TRUE(
      absl::IsCancelled(ReadRankTrace(**db, 0, {}, [](const v1::TraceChunk&) { return false; })));
}

}  // namespace
}  // namespace flopscope::daemon
