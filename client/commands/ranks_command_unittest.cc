// `flopscope ranks` against an in-process Query service that counts the requests it gets: the
// listing of many ranks must take one ListRanks and one GetRankReports, never a request per rank.

#include "client/commands/ranks_command.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace v1 = flopscope::v1;

constexpr char kJob[] = "wide-job";

// One rank's report: a model of four layers, a `step` phase with its median, and a GPU.
v1::Report RankReportOf(int rank, bool slow) {
  v1::Report report;
  report.set_job_id(kJob);
  v1::RankInfo* info = report.add_ranks();
  info->set_rank(rank);
  info->set_world_size(1);
  info->add_devices()->set_name("NVIDIA H100 80GB HBM3");
  auto add_module = [&](const std::string& path, uint32_t depth, int64_t gpu_ns) {
    v1::ModuleStats* module = report.add_modules();
    module->set_path(path);
    module->set_name(path.substr(path.rfind('/') + 1));
    module->set_depth(depth);
    module->set_kernels(10);
    module->set_gpu_time_ns(gpu_ns);
  };
  // Ten uncounted steps; the slow rank spends 3 ms more per step in layer.2.
  const int64_t extra = slow ? 30'000'000 : 0;
  add_module("model", 0, 40'000'000 + extra);
  for (int layer = 0; layer < 4; ++layer) {
    add_module(absl::StrCat("model/layer.", layer), 1, 10'000'000 + (layer == 2 ? extra : 0));
  }
  v1::PhaseStats* step = report.add_phases();
  step->set_name("step");
  step->set_calls(10);
  step->set_cpu_time_ns(10 * (5'000'000 + extra / 10));
  step->set_median_ns(5'000'000 + extra / 10);
  report.mutable_steps()->set_uncounted_steps(10);
  report.mutable_steps()->set_last_step(9);
  return report;
}

// The daemon's Query service for one job of `ranks` ranks; counts every request.
class CountingQuery final : public v1::Query::Service {
 public:
  CountingQuery(int ranks, int slow_rank, int unreadable_rank)
      : ranks_(ranks), slow_rank_(slow_rank), unreadable_rank_(unreadable_rank) {}

  grpc::Status ListRanks(grpc::ServerContext*, const v1::ListRanksRequest* request,
                         v1::ListRanksResponse* response) override {
    ++list_ranks;
    if (request->job_id() != kJob) return NotFound(request->job_id());
    for (int rank = 0; rank < ranks_; ++rank) *response->add_ranks() = InfoOf(rank);
    return grpc::Status::OK;
  }

  grpc::Status GetReport(grpc::ServerContext*, const v1::ReportRequest* request,
                         v1::Report* response) override {
    ++get_report;
    *response = RankReportOf(request->ranks_size() > 0 ? request->ranks(0) : 0, false);
    return grpc::Status::OK;
  }

  grpc::Status GetRankReports(grpc::ServerContext*, const v1::ReportRequest* request,
                              grpc::ServerWriter<v1::RankReport>* writer) override {
    ++get_rank_reports;
    if (!request->omit_step_times()) ++step_times_asked;
    first_step = request->has_first_step() ? request->first_step() : -1;
    last_step = request->has_last_step() ? request->last_step() : -1;
    if (request->job_id() != kJob) return NotFound(request->job_id());
    for (int rank = 0; rank < ranks_; ++rank) {
      v1::RankReport answer;
      answer.set_rank(rank);
      if (describe_ranks) *answer.mutable_info() = InfoOf(rank);
      if (rank == unreadable_rank_) {
        answer.set_problem(
            absl::StrCat("job '", kJob, "' rank ", rank, ": file is not a database"));
      } else {
        *answer.mutable_report() = RankReportOf(rank, rank == slow_rank_);
      }
      if (!writer->Write(answer)) break;
    }
    return grpc::Status::OK;
  }

  // Bumped on gRPC's handler threads, read by the test thread after the calls returned.
  std::atomic<int> list_ranks{0};
  std::atomic<int> get_report{0};
  std::atomic<int> get_rank_reports{0};
  std::atomic<int> step_times_asked{0};  // requests without omit_step_times
  // The last GetRankReports' step window (-1: not set).
  std::atomic<int64_t> first_step{-1};
  std::atomic<int64_t> last_step{-1};
  // Set before the calls: each report carries its RankInfo, as a daemon with RankReport.info
  // sends it; false answers as an older daemon.
  bool describe_ranks = false;

 private:
  static v1::RankInfo InfoOf(int rank) {
    v1::RankInfo info;
    info.set_job_id(kJob);
    info.set_rank(rank);
    info.set_host(absl::StrCat("node-", rank / 8));
    return info;
  }

  static grpc::Status NotFound(const std::string& job) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("job '", job, "' not found"));
  }

  const int ranks_;
  const int slow_rank_;
  const int unreadable_rank_;
};

class RanksCommandTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 300;
  static constexpr int kSlowRank = 123;
  static constexpr int kUnreadableRank = 7;

  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/ranks-command-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    socket_ = directory_ + "/query.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  CountingQuery service_{kRanks, kSlowRank, kUnreadableRank};
  std::string directory_;
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RanksCommandTest, ManyRanksAreListedWithOneRequestForTheirReports) {
  const DaemonClient daemon(socket_);
  RanksOptions options;
  options.job_id = kJob;
  absl::StatusOr<std::string> listing = RenderRanksListing(daemon, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(service_.list_ranks.load(), 1);
  EXPECT_EQ(service_.get_rank_reports.load(), 1);
  EXPECT_EQ(service_.get_report.load(), 0);
  // The listing draws no step's time: asking for them would send ~130 kB a rank of a long job.
  EXPECT_EQ(service_.step_times_asked.load(), 0);
  const std::vector<std::string> lines = absl::StrSplit(*listing, '\n', absl::SkipEmpty());
  // The steps, header, rule, one line per rank, then the unreadable rank's reason.
  ASSERT_EQ(lines.size(), static_cast<size_t>(kRanks) + 4) << *listing;
  EXPECT_EQ(lines.back(), absl::StrCat("Rank ", kUnreadableRank, ": no figures: job '", kJob,
                                       "' rank ", kUnreadableRank, ": file is not a database"));
}

TEST_F(RanksCommandTest, ADaemonThatDescribesItsRanksAnswersTheListingInOneRequest) {
  service_.describe_ranks = true;
  const DaemonClient daemon(socket_);
  RanksOptions options;
  options.job_id = kJob;
  absl::StatusOr<std::string> listing = RenderRanksListing(daemon, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(service_.list_ranks.load(), 0);  // each report carried its rank's listing
  EXPECT_EQ(service_.get_rank_reports.load(), 1);
  const std::vector<std::string> lines = absl::StrSplit(*listing, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kRanks) + 4) << *listing;
  // The same listing as from an older daemon, which is asked for the list as well.
  service_.describe_ranks = false;
  absl::StatusOr<std::string> asked_twice = RenderRanksListing(daemon, options);
  ASSERT_TRUE(asked_twice.ok()) << asked_twice.status();
  EXPECT_EQ(service_.list_ranks.load(), 1);
  EXPECT_EQ(*asked_twice, *listing);
  // A rank's row shows its host, which only the RankInfo has.
  EXPECT_TRUE(absl::StrContains(lines[3], "node-0")) << lines[3];
}

TEST_F(RanksCommandTest, FiguresComeInRankOrderWithTheStragglerNamed) {
  const DaemonClient daemon(socket_);
  absl::StatusOr<v1::ListRanksResponse> ranks = daemon.ListRanks(kJob);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  absl::StatusOr<std::vector<RankFigures>> figures = FetchRankFigures(daemon, *ranks, {}, {});
  ASSERT_TRUE(figures.ok()) << figures.status();
  ASSERT_EQ(figures->size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(service_.get_rank_reports.load(), 1);
  for (int rank = 0; rank < kRanks; ++rank) {
    const RankFigures& rank_figures = (*figures)[rank];
    EXPECT_EQ(rank_figures.straggler.has_value(), rank == kSlowRank) << rank;
    EXPECT_EQ(rank_figures.problem.empty(), rank != kUnreadableRank) << rank;
  }
  const RankFigures& slow = (*figures)[kSlowRank];
  // Its step median is 8 ms against 5 ms for every other rank.
  EXPECT_DOUBLE_EQ(slow.straggler->step_s, 0.008);
  EXPECT_DOUBLE_EQ(slow.straggler->median_step_s, 0.005);
  EXPECT_EQ(slow.straggler->module, "model/layer.2");
  EXPECT_EQ((*figures)[0].profile.steps, 10u);
  EXPECT_EQ((*figures)[kUnreadableRank].profile.modules.size(), 0u);
}

TEST_F(RanksCommandTest, AnUnknownJobFailsTheListing) {
  const DaemonClient daemon(socket_);
  v1::ListRanksResponse ranks;
  v1::RankInfo* info = ranks.add_ranks();
  info->set_job_id("gone");
  absl::StatusOr<std::vector<RankFigures>> figures = FetchRankFigures(daemon, ranks, {}, {});
  EXPECT_EQ(figures.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(figures.status().message(), "job 'gone' not found");
  EXPECT_TRUE(FetchRankFigures(daemon, v1::ListRanksResponse(), {}, {})->empty());
}

// Issue 32: `ranks` took every step, warm-up included, where `report` leaves step 0 out.
TEST_F(RanksCommandTest, TheListingTakesReportsStepsAndItsStepsOption) {
  const DaemonClient daemon(socket_);
  RanksOptions options;
  options.job_id = kJob;
  absl::StatusOr<std::string> listing = RenderRanksListing(daemon, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(service_.first_step.load(), 1) << "step 0 is warm-up, as in `report`";
  EXPECT_EQ(service_.last_step.load(), -1);
  EXPECT_TRUE(absl::StartsWith(*listing, "Steps: step 0 left out as warm-up")) << *listing;
  options.steps = "2:3";
  listing = RenderRanksListing(daemon, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(service_.first_step.load(), 2);
  EXPECT_EQ(service_.last_step.load(), 3);
  options.steps = "3:2";
  EXPECT_EQ(RenderRanksListing(daemon, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flopscope::client
