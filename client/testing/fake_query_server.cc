#include "client/testing/fake_query_server.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace flopscope::client::testing {

class FakeQueryServer::Service final : public flopscope::v1::Query::Service {
 public:
  Service(flopscope::v1::ListJobsResponse jobs, flopscope::v1::Report report)
      : jobs_(std::move(jobs)), report_(std::move(report)) {}

  grpc::Status ListJobs(grpc::ServerContext*, const flopscope::v1::ListJobsRequest*,
                        flopscope::v1::ListJobsResponse* response) override {
    *response = jobs_;
    return grpc::Status::OK;
  }

  grpc::Status GetReport(grpc::ServerContext*, const flopscope::v1::ReportRequest* request,
                         flopscope::v1::Report* response) override {
    {
      // gRPC runs handlers on its own threads while the test thread reads last_ranks_.
      absl::MutexLock lock(&mutex_);
      last_ranks_.assign(request->ranks().begin(), request->ranks().end());
      Note("report", *request);
    }
    if (request->job_id() != report_.job_id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job '", request->job_id(), "' not found"));
    }
    *response = report_;
    return grpc::Status::OK;
  }

  // Every requested rank (rank 0 when none is named) answers with the one canned report, as
  // the daemon streams each rank's own report.
  grpc::Status GetRankReports(grpc::ServerContext*, const flopscope::v1::ReportRequest* request,
                              grpc::ServerWriter<flopscope::v1::RankReport>* writer) override {
    {
      absl::MutexLock lock(&mutex_);
      Note("rank-reports", *request);
    }
    if (request->job_id() != report_.job_id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job '", request->job_id(), "' not found"));
    }
    std::vector<int> ranks(request->ranks().begin(), request->ranks().end());
    if (ranks.empty()) ranks.push_back(0);
    for (int rank : ranks) {
      flopscope::v1::RankReport answer;
      answer.set_rank(rank);
      *answer.mutable_report() = report_;
      writer->Write(answer);
    }
    return grpc::Status::OK;
  }

  std::vector<int> last_ranks() const {
    absl::MutexLock lock(&mutex_);
    return last_ranks_;
  }

  std::vector<std::string> step_times_asked() const {
    absl::MutexLock lock(&mutex_);
    return step_times_asked_;
  }

 private:
  void Note(const char* rpc, const flopscope::v1::ReportRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    step_times_asked_.push_back(
        absl::StrCat(rpc, request.omit_step_times() ? " no step times" : " step times"));
  }

  const flopscope::v1::ListJobsResponse jobs_;
  const flopscope::v1::Report report_;
  mutable absl::Mutex mutex_;
  std::vector<int> last_ranks_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::string> step_times_asked_ ABSL_GUARDED_BY(mutex_);
};

FakeQueryServer::FakeQueryServer(flopscope::v1::ListJobsResponse jobs, flopscope::v1::Report report)
    : service_(std::make_unique<Service>(std::move(jobs), std::move(report))) {
  std::string pattern = absl::StrCat(::testing::TempDir(), "/fake-flopscoped-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return;
  directory_ = pattern;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", directory_, "/query.sock"),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ != nullptr) socket_ = directory_ + "/query.sock";
}

FakeQueryServer::~FakeQueryServer() {
  if (server_ != nullptr) server_->Shutdown();
  if (!directory_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
}

std::vector<int> FakeQueryServer::last_requested_ranks() const { return service_->last_ranks(); }

std::vector<std::string> FakeQueryServer::step_times_asked() const {
  return service_->step_times_asked();
}

}  // namespace flopscope::client::testing
