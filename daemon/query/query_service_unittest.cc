// The query service over hand-made rank files: per-step figures (steps numbered in start order,
// medians, counted steps left out, step windows) and one call answering every rank.

#include "daemon/query/query_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/store/data_layout.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kJob[] = "steps-job";

// Paths of every rank file below.
constexpr uint64_t kStep = 1, kForward = 2, kModel = 3, kLayer = 4, kLoss = 5;

// One rank's steps: the step k starts at k * 100 us and lasts step_ns[k] (at least 1 us, which
// holds every range of the step); inside it `forward`,
// the module `model` with its child `layer` (whose kernels are busy layer_busy_ns[k]) and the
// kernel-less module `loss` (loss_ns[k] push to pop). Steps listed in `counted` ran inside a
// counter window: all of their ranges and kernels carry `counted`, as the injector marks them.
struct RankSteps {
  std::vector<int64_t> step_ns;
  std::vector<int64_t> layer_busy_ns;
  std::vector<int64_t> loss_ns;
  std::vector<int> counted;
  // The order the steps are committed in (a later step may come first: numbering must follow
  // the start times, not the rows).
  std::vector<int> commit_order;
};

class StepBatch {
 public:
  StepBatch() {
    batch_.set_seq(1);
    fixtures::AddString(batch_, 1, "gemm");
    fixtures::AddPath(batch_, kStep, 0, "step", "flopscope");
    fixtures::AddPath(batch_, kForward, kStep, "forward", "flopscope");
    fixtures::AddPath(batch_, kModel, 0, "model");
    fixtures::AddPath(batch_, kLayer, kModel, "layer");
    fixtures::AddPath(batch_, kLoss, 0, "loss");
  }

  void AddStep(const RankSteps& rank, int k) {
    const bool counted =
        std::find(rank.counted.begin(), rank.counted.end(), k) != rank.counted.end();
    const int64_t start = 100'000 * static_cast<int64_t>(k);
    const uint64_t model = next_instance_++;
    const uint64_t layer = Range(kLayer, model, start + 100, 500, counted);
    // Two kernels back to back: busy time is their sum.
    Kernel(layer, start + 150, rank.layer_busy_ns[k] / 2, counted);
    Kernel(layer, start + 150 + rank.layer_busy_ns[k] / 2,
           rank.layer_busy_ns[k] - rank.layer_busy_ns[k] / 2, counted);
    Range(kModel, 0, start + 50, 700, counted, model);
    Range(kLoss, 0, start + 760, rank.loss_ns[k], counted);
    Range(kForward, 0, start + 40, 800, counted);
    Range(kStep, 0, start, rank.step_ns[k], counted);
  }

  const v1::Batch& batch() const { return batch_; }

 private:
  uint64_t Range(uint64_t path, uint64_t parent, int64_t start, int64_t duration, bool counted,
                 uint64_t instance = 0) {
    v1::RangeEvent* range = batch_.add_ranges();
    range->set_path_id(path);
    range->set_instance_id(instance != 0 ? instance : next_instance_++);
    range->set_parent_instance_id(parent);
    range->set_thread_id(path == kStep || path == kForward ? 1 : 77);
    range->set_start_ns(fixtures::BaseNs() + start);
    range->set_end_ns(fixtures::BaseNs() + start + duration);
    range->set_kind(v1::RANGE_KIND_PUSH_POP);
    range->set_counted(counted);
    return range->instance_id();
  }

  void Kernel(uint64_t instance, int64_t start, int64_t duration, bool counted) {
    v1::KernelRecord* kernel = fixtures::AddKernel(batch_, kLayer, 1, start, duration);
    kernel->set_range_instance_id(instance);
    kernel->set_counted(counted);
  }

  v1::Batch batch_;
  uint64_t next_instance_ = 1;
};

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(dir_.File("catalog.sqlite"));
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    service_ = std::make_unique<QueryService>(dir_.path(), catalog_.get());
  }

  void Store(int rank, const v1::Batch& batch) {
    ASSERT_TRUE(EnsureDirectory(JobDirectory(dir_.path(), kJob)).ok());
    absl::StatusOr<std::unique_ptr<RankStore>> store =
        RankStore::Open(RankFilePath(dir_.path(), kJob, rank));
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::SessionHello hello = fixtures::Hello(kJob, rank, "session-" + std::to_string(rank));
    absl::StatusOr<SessionHandle> session = (*store)->OpenSession(hello);
    ASSERT_TRUE(session.ok()) << session.status();
    absl::Status committed = (*store)->Commit(session->sid, batch);
    ASSERT_TRUE(committed.ok()) << committed;
    ASSERT_TRUE(catalog_->SessionConnected(hello, fixtures::BaseNs()).ok());
  }

  void StoreSteps(int rank, const RankSteps& steps) {
    StepBatch batch;
    for (int k : steps.commit_order) batch.AddStep(steps, k);
    Store(rank, batch.batch());
  }

  absl::StatusOr<v1::Report> Report(std::optional<int64_t> first, std::optional<int64_t> last,
                                    std::vector<int32_t> ranks = {}) {
    v1::ReportRequest request;
    request.set_job_id(kJob);
    for (int32_t rank : ranks) request.add_ranks(rank);
    if (first) request.set_first_step(*first);
    if (last) request.set_last_step(*last);
    return service_->BuildReport(request);
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<QueryService> service_;
};

const v1::PhaseStats& Phase(const v1::Report& report, const std::string& name) {
  for (const v1::PhaseStats& phase : report.phases()) {
    if (phase.name() == name) return phase;
  }
  ADD_FAILURE() << "no phase " << name;
  static const v1::PhaseStats kNone;
  return kNone;
}

const v1::ModuleStats& Module(const v1::Report& report, const std::string& path) {
  for (const v1::ModuleStats& module : report.modules()) {
    if (module.path() == path) return module;
  }
  ADD_FAILURE() << "no module " << path;
  static const v1::ModuleStats kNone;
  return kNone;
}

// Five steps, step 3 counted (its figures are ten times as long: replay-slowed).
RankSteps FiveSteps() {
  return RankSteps{.step_ns = {1'000, 3'000, 2'000, 50'000, 4'000},
                   .layer_busy_ns = {100, 300, 200, 9'000, 400},
                   .loss_ns = {50, 70, 60, 900, 80},
                   .counted = {3},
                   .commit_order = {2, 0, 4, 1, 3}};
}

TEST_F(QueryServiceTest, PhasesGetTheMedianOfTheUncountedSteps) {
  StoreSteps(0, FiveSteps());
  absl::StatusOr<v1::Report> report = Report(std::nullopt, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status();
  const v1::PhaseStats& step = Phase(*report, "step");
  EXPECT_EQ(step.calls(), 4u);
  EXPECT_EQ(step.cpu_time_ns(), 1'000 + 3'000 + 2'000 + 4'000);
  EXPECT_EQ(step.median_ns(), 2'500);  // even count: the mean of 2000 and 3000
  EXPECT_EQ(step.min_ns(), 1'000);
  EXPECT_EQ(step.max_ns(), 4'000);
  EXPECT_EQ(Phase(*report, "forward").median_ns(), 800);
  EXPECT_FALSE(report->steps().requested());
  EXPECT_EQ(report->steps().first_step(), 0);
  EXPECT_EQ(report->steps().last_step(), 4);
  EXPECT_EQ(report->steps().uncounted_steps(), 4u);
  EXPECT_THAT(report->steps().counted_steps(), ElementsAre(3));
  // Whole-run module figures stay totals; per-step latencies come with a window.
  EXPECT_FALSE(Module(*report, "model").has_step_latency());
}

TEST_F(QueryServiceTest, AWindowGivesEveryModuleItsMedianPerStep) {
  StoreSteps(0, FiveSteps());
  absl::StatusOr<v1::Report> report = Report(0, 2);
  ASSERT_TRUE(report.ok()) << report.status();
  // Steps 0-2 by start time (committed as 2, 0, 1): 1000, 3000, 2000.
  const v1::PhaseStats& step = Phase(*report, "step");
  EXPECT_EQ(step.calls(), 3u);
  EXPECT_EQ(step.median_ns(), 2'000);
  EXPECT_EQ(step.max_ns(), 3'000);
  // `model` has kernels through its child: its latency is their busy time.
  const v1::StepLatency& model = Module(*report, "model").step_latency();
  EXPECT_TRUE(model.gpu());
  EXPECT_EQ(model.samples(), 3u);
  EXPECT_EQ(model.median_ns(), 200);
  EXPECT_EQ(model.min_ns(), 100);
  EXPECT_EQ(model.max_ns(), 300);
  EXPECT_EQ(Module(*report, "model/layer").step_latency().median_ns(), 200);
  const v1::StepLatency& loss = Module(*report, "loss").step_latency();
  EXPECT_FALSE(loss.gpu());
  EXPECT_EQ(loss.median_ns(), 60);
  EXPECT_TRUE(report->steps().requested());
  EXPECT_EQ(report->steps().uncounted_steps(), 3u);
  EXPECT_TRUE(report->steps().counted_steps().empty());
}

TEST_F(QueryServiceTest, ACountedStepInTheWindowIsLeftOutAndNamed) {
  StoreSteps(0, FiveSteps());
  absl::StatusOr<v1::Report> report = Report(2, std::nullopt);  // "2:": steps 2, 3, 4
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps().first_step(), 2);
  EXPECT_EQ(report->steps().last_step(), 4);
  EXPECT_EQ(report->steps().uncounted_steps(), 2u);
  EXPECT_THAT(report->steps().counted_steps(), ElementsAre(3));
  const v1::StepLatency& layer = Module(*report, "model/layer").step_latency();
  EXPECT_EQ(layer.samples(), 2u);
  EXPECT_EQ(layer.median_ns(), 300);  // (200 + 400) / 2; the counted 9000 is not there
  EXPECT_EQ(layer.max_ns(), 400);
  EXPECT_EQ(Phase(*report, "step").max_ns(), 4'000);
}

TEST_F(QueryServiceTest, WindowsThatSelectNothingAreClearErrors) {
  StoreSteps(0, FiveSteps());
  absl::StatusOr<v1::Report> past = Report(5, 9);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("steps 5:9 are past the last step"));
  EXPECT_THAT(past.status().message(), HasSubstr("0-4"));
  absl::StatusOr<v1::Report> backwards = Report(3, 1);
  EXPECT_EQ(backwards.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backwards.status().message(), HasSubstr("ends before it starts"));
  EXPECT_EQ(Report(-1, std::nullopt).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(QueryServiceTest, AWindowOverAJobWithoutStepsSaysSo) {
  v1::Batch batch;
  batch.set_seq(1);
  fixtures::AddPath(batch, 1, 0, "model");
  fixtures::AddRange(batch, 1, 0, 500);
  Store(0, batch);
  absl::StatusOr<v1::Report> report = Report(0, 3);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("marks no steps"));
  absl::StatusOr<v1::Report> whole = Report(std::nullopt, std::nullopt);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(whole->has_steps());
}

TEST_F(QueryServiceTest, RanksPoolTheirStepsPerGpu) {
  StoreSteps(0, FiveSteps());
  RankSteps other = FiveSteps();
  other.counted.clear();
  other.layer_busy_ns = {500, 600, 700, 800, 900};
  StoreSteps(1, other);
  absl::StatusOr<v1::Report> report = Report(0, 4);
  ASSERT_TRUE(report.ok()) << report.status();
  // Rank 0: 100 300 200 400; rank 1: 500 600 700 800 900.
  const v1::StepLatency& layer = Module(*report, "model/layer").step_latency();
  EXPECT_EQ(layer.samples(), 9u);
  EXPECT_EQ(layer.median_ns(), 500);
  EXPECT_EQ(layer.min_ns(), 100);
  EXPECT_EQ(layer.max_ns(), 900);
  EXPECT_EQ(report->steps().uncounted_steps(), 9u);
  EXPECT_THAT(report->steps().counted_steps(), ElementsAre(3));
}

TEST_F(QueryServiceTest, OneCallAnswersEveryRankAndNamesTheUnreadableOne) {
  StoreSteps(0, FiveSteps());
  StoreSteps(2, FiveSteps());
  StoreSteps(1, FiveSteps());
  // Rank 1's file is damaged after the catalog listed it.
  std::ofstream(RankFilePath(dir_.path(), kJob, 1), std::ios::trunc) << "not a database";
  v1::ReportRequest request;
  request.set_job_id(kJob);
  std::vector<v1::RankReport> answers;
  absl::Status status = service_->ForEachRankReport(request, [&](v1::RankReport answer) {
    answers.push_back(std::move(answer));
    return true;
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].rank(), 0);
  ASSERT_EQ(answers[0].report().ranks_size(), 1);
  EXPECT_EQ(answers[0].report().ranks(0).rank(), 0);
  EXPECT_EQ(Phase(answers[0].report(), "step").median_ns(), 2'500);
  EXPECT_EQ(answers[1].rank(), 1);
  EXPECT_FALSE(answers[1].has_report());
  EXPECT_THAT(answers[1].problem(), HasSubstr("rank 1"));
  // Every answer carries its rank as ListRanks lists it, the unreadable one too: `flopscope
  // ranks` needs no second request.
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(answers[rank].info().rank(), rank);
    EXPECT_EQ(answers[rank].info().job_id(), kJob);
  }
  EXPECT_EQ(answers[2].report().ranks(0).rank(), 2);

  request.add_ranks(2);
  answers.clear();
  ASSERT_TRUE(service_
                  ->ForEachRankReport(request,
                                      [&](v1::RankReport answer) {
                                        answers.push_back(std::move(answer));
                                        return false;  // the client went away after the first
                                      })
                  .code() == absl::StatusCode::kCancelled);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].rank(), 2);

  request.add_ranks(7);
  EXPECT_EQ(service_->ForEachRankReport(request, [](v1::RankReport) { return true; }).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(QueryServiceTest, ReportsLeaveOutTheStepTimesWhenAskedTo) {
  // The step times are most of a long job's report; `report`'s tree and `ranks` draw none.
  StoreSteps(0, FiveSteps());
  StoreSteps(1, FiveSteps());
  v1::ReportRequest request;
  request.set_job_id(kJob);
  absl::StatusOr<v1::Report> full = service_->BuildReport(request);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(Phase(*full, "step").per_step_size(), 2 * 4);  // two ranks, four uncounted steps
  request.set_omit_step_times(true);
  absl::StatusOr<v1::Report> lean = service_->BuildReport(request);
  ASSERT_TRUE(lean.ok()) << lean.status();
  EXPECT_EQ(Phase(*lean, "step").per_step_size(), 0);
  EXPECT_EQ(Phase(*lean, "step").median_ns(), Phase(*full, "step").median_ns());
  EXPECT_EQ(Phase(*lean, "step").calls(), 8u);
  // Each rank's own report, as `flopscope ranks` asks for them: its count of step times.
  auto step_times_per_rank = [&] {
    std::vector<int> counts;
    absl::Status status = service_->ForEachRankReport(request, [&](v1::RankReport answer) {
      counts.push_back(Phase(answer.report(), "step").per_step_size());
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    return counts;
  };
  EXPECT_THAT(step_times_per_rank(), ElementsAre(0, 0));
  request.set_omit_step_times(false);
  EXPECT_THAT(step_times_per_rank(), ElementsAre(4, 4));
}

TEST_F(QueryServiceTest, AJobReportLeavesOutAnUnreadableRankAndNamesIt) {
  StoreSteps(0, FiveSteps());
  StoreSteps(1, FiveSteps());
  const std::string rank1 = RankFilePath(dir_.path(), kJob, 1);
  // As a start finds it damaged: moved aside, so the rank has no file of its own any more.
  std::filesystem::rename(rank1, rank1 + ".damaged");

  absl::StatusOr<v1::Report> report = Report(std::nullopt, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->ranks_size(), 1);
  EXPECT_EQ(report->ranks(0).rank(), 0);
  EXPECT_EQ(Phase(*report, "step").median_ns(), 2'500);  // rank 0's figures, alone
  ASSERT_EQ(report->unreadable_ranks_size(), 1);
  EXPECT_EQ(report->unreadable_ranks(0).rank(), 1);
  EXPECT_THAT(report->unreadable_ranks(0).problem(),
              HasSubstr("moved aside to " + rank1 + ".damaged"));

  // Asked for the unreadable rank alone: nothing to report, so the error itself.
  absl::StatusOr<v1::Report> alone = Report(std::nullopt, std::nullopt, {1});
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(alone.status().message(), HasSubstr("rank 1"));
}

}  // namespace
}  // namespace flopscope::daemon
