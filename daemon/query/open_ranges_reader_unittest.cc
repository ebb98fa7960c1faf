// `flopscope where` on the daemon's side: snapshots of open ranges committed through RankStore
// (the batch writer's open_ranges table) and read back by Query.GetOpenRanges, paths spelled out.

#include "daemon/query/open_ranges_reader.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/query/query_service.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

constexpr char kWhereJob[] = "where-job";
constexpr int64_t kWhereSecond = 1'000'000'000;

// Paths: step/forward (flopscope domain), Net/slowed.
void DefineWherePaths(v1::Batch& batch) {
  fixtures::AddPath(batch, 1, 0, "step", "flopscope");
  fixtures::AddPath(batch, 2, 1, "forward", "flopscope");
  fixtures::AddPath(batch, 3, 0, "Net");
  fixtures::AddPath(batch, 4, 3, "slowed");
}

// A snapshot taken `at` s after BaseNs(): one thread in step/forward and Net/slowed, opened at
// BaseNs() + 0, 1, 2, 3 ms; or nothing open.
void SetWhereSnapshot(v1::Batch& batch, double at, bool open) {
  v1::OpenRanges* snapshot = batch.mutable_open_ranges();
  snapshot->set_time_ns(fixtures::BaseNs() + static_cast<int64_t>(at * kWhereSecond));
  if (!open) return;
  v1::ThreadOpenRanges* thread = snapshot->add_threads();
  thread->set_thread_id(77);
  for (uint64_t path : {1, 2}) {
    v1::OpenRange* range = thread->add_phases();
    range->set_path_id(path);
    range->set_start_ns(fixtures::BaseNs() + static_cast<int64_t>(path - 1) * 1'000'000);
  }
  for (uint64_t path : {3, 4}) {
    v1::OpenRange* range = thread->add_modules();
    range->set_path_id(path);
    range->set_start_ns(fixtures::BaseNs() + static_cast<int64_t>(path - 1) * 1'000'000);
  }
  thread->set_phase_depth(2);
  thread->set_module_depth(2);
}

class OpenRangesQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir_.File("catalog.sqlite"));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    service_ = std::make_unique<QueryService>(dir_.path(), catalog_.get());
    ASSERT_TRUE(EnsureDirectory(JobDirectory(dir_.path(), kWhereJob)).ok());
  }

  // Commits `batches` as one session of `rank`, listed as connected.
  void Store(int rank, std::vector<v1::Batch> batches) {
    absl::StatusOr<std::unique_ptr<RankStore>> store =
        RankStore::Open(RankFilePath(dir_.path(), kWhereJob, rank));
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::SessionHello hello =
        fixtures::Hello(kWhereJob, rank, "where-session-" + std::to_string(rank));
    absl::StatusOr<SessionHandle> session = (*store)->OpenSession(hello);
    ASSERT_TRUE(session.ok()) << session.status();
    uint64_t seq = 0;
    for (v1::Batch& batch : batches) {
      batch.set_seq(++seq);
      const absl::Status committed = (*store)->Commit(session->sid, batch);
      ASSERT_TRUE(committed.ok()) << committed;
    }
    ASSERT_TRUE(catalog_->SessionConnected(hello, fixtures::BaseNs()).ok());
  }

  v1::OpenRangesResponse Ask() {
    absl::StatusOr<v1::OpenRangesResponse> answer =
        service_->BuildOpenRanges(kWhereJob, fixtures::BaseNs() + 10 * kWhereSecond);
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? *answer : v1::OpenRangesResponse();
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<QueryService> service_;
};

std::vector<std::string> PathsOf(const google::protobuf::RepeatedPtrField<v1::OpenRangeAt>& at) {
  std::vector<std::string> paths;
  for (const v1::OpenRangeAt& range : at) paths.push_back(range.path());
  return paths;
}

TEST_F(OpenRangesQueryTest, EveryRankGetsItsLatestSnapshotWithPathsSpelledOut) {
  v1::Batch hung;
  DefineWherePaths(hung);
  SetWhereSnapshot(hung, 1, /*open=*/true);
  Store(0, {hung});
  v1::Batch idle;
  SetWhereSnapshot(idle, 1, /*open=*/false);
  Store(1, {idle});
  Store(2, {v1::Batch()});  // no snapshot ever

  const v1::OpenRangesResponse answer = Ask();
  EXPECT_EQ(answer.now_ns(), fixtures::BaseNs() + 10 * kWhereSecond);
  ASSERT_EQ(answer.ranks_size(), 3);
  const v1::RankOpenRanges& rank0 = answer.ranks(0);
  EXPECT_TRUE(rank0.connected());
  EXPECT_TRUE(rank0.has_snapshot());
  EXPECT_EQ(rank0.snapshot_ns(), fixtures::BaseNs() + kWhereSecond);
  EXPECT_EQ(rank0.session_id(), "where-session-0");
  ASSERT_EQ(rank0.threads_size(), 1);
  const v1::ThreadOpenStack& thread = rank0.threads(0);
  EXPECT_EQ(thread.thread_id(), 77u);
  EXPECT_EQ(PathsOf(thread.phases()), (std::vector<std::string>{"step", "step/forward"}));
  EXPECT_EQ(PathsOf(thread.modules()), (std::vector<std::string>{"Net", "Net/slowed"}));
  EXPECT_EQ(thread.modules(1).start_ns(), fixtures::BaseNs() + 3'000'000);
  EXPECT_EQ(thread.module_depth(), 2u);
  EXPECT_TRUE(answer.ranks(1).has_snapshot());
  EXPECT_EQ(answer.ranks(1).threads_size(), 0) << "nothing open";
  EXPECT_FALSE(answer.ranks(2).has_snapshot());
  EXPECT_TRUE(answer.ranks(2).problem().empty());
}

TEST_F(OpenRangesQueryTest, AnOlderSnapshotNeverReplacesANewerOne) {
  // A spool's replay can deliver an older batch after a newer one of the same session.
  v1::Batch newer;
  DefineWherePaths(newer);
  SetWhereSnapshot(newer, 5, /*open=*/true);
  v1::Batch older;
  SetWhereSnapshot(older, 2, /*open=*/false);
  Store(0, {newer, older});
  v1::OpenRangesResponse answer = Ask();
  ASSERT_EQ(answer.ranks_size(), 1);
  EXPECT_EQ(answer.ranks(0).snapshot_ns(), fixtures::BaseNs() + 5 * kWhereSecond);
  EXPECT_EQ(answer.ranks(0).threads_size(), 1);
}

TEST_F(OpenRangesQueryTest, TheNewestSessionOfARankStandsForIt) {
  v1::Batch first;
  DefineWherePaths(first);
  SetWhereSnapshot(first, 3, /*open=*/true);
  Store(0, {first});
  // The rank restarted: a second session of the same rank, later, with nothing open.
  absl::StatusOr<std::unique_ptr<RankStore>> store =
      RankStore::Open(RankFilePath(dir_.path(), kWhereJob, 0));
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<SessionHandle> session =
      (*store)->OpenSession(fixtures::Hello(kWhereJob, 0, "where-restart"));
  ASSERT_TRUE(session.ok()) << session.status();
  v1::Batch later;
  later.set_seq(1);
  SetWhereSnapshot(later, 4, /*open=*/false);
  ASSERT_TRUE((*store)->Commit(session->sid, later).ok());
  const v1::OpenRangesResponse answer = Ask();
  ASSERT_EQ(answer.ranks_size(), 1);
  EXPECT_EQ(answer.ranks(0).session_id(), "where-restart");
  EXPECT_EQ(answer.ranks(0).threads_size(), 0);
}

}  // namespace
}  // namespace flopscope::daemon
