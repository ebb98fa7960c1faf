#include "client/connect/daemon_client.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/testing/fake_query_server.h"
#include "client/testing/sample_report.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

std::string NobodyListensHere() {
  return fs::weakly_canonical(fs::path(::testing::TempDir()) / "nobody-listens.sock").string();
}

TEST(DaemonClientTest, NothingListeningGivesTheStartHint) {
  const std::string socket = NobodyListensHere();
  const DaemonClient daemon(socket);
  absl::StatusOr<flopscope::v1::ListJobsResponse> jobs = daemon.ListJobs();
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(jobs.status().message(),
            absl::StrCat("cannot reach flopscoped at unix:", socket,
                         " (not running? start it with: flopscoped --socket ", socket, ")"));
  EXPECT_EQ(daemon.GetReport({}).status(), jobs.status());
  EXPECT_EQ(daemon.CheckReachable(absl::Milliseconds(50)), jobs.status());
}

TEST(DaemonClientTest, AStaleSocketFileIsUnreachableToo) {
  const std::string socket = NobodyListensHere() + ".stale";
  { std::ofstream(socket) << ""; }
  const DaemonClient daemon(socket);
  EXPECT_EQ(daemon.ListJobs().status().code(), absl::StatusCode::kUnavailable);
  fs::remove(socket);
}

TEST(DaemonClientTest, NormalizesSocketsButKeepsTargets) {
  EXPECT_EQ(DaemonClient::NormalizeSocket("/run/f.sock"), "/run/f.sock");
  EXPECT_EQ(DaemonClient::NormalizeSocket("unix:/run/f.sock"), "/run/f.sock");
  EXPECT_EQ(DaemonClient::NormalizeSocket("rel/f.sock"),
            (fs::current_path() / "rel/f.sock").string());
  EXPECT_EQ(DaemonClient::NormalizeSocket("localhost:7000"), "localhost:7000");
  EXPECT_EQ(DaemonClient::NormalizeSocket("unix-abstract:flopscope"), "unix-abstract:flopscope");
  const DaemonClient daemon("rel/f.sock");
  EXPECT_EQ(daemon.target(), "unix:" + (fs::current_path() / "rel/f.sock").string());
}

TEST(DaemonClientTest, AnswersComeBackAndDaemonErrorsPassThrough) {
  flopscope::v1::ListJobsResponse jobs;
  jobs.add_jobs()->set_job_id("demo-job");
  testing::FakeQueryServer server(jobs, testing::CpuOnlyReport());
  ASSERT_FALSE(server.socket().empty());
  const DaemonClient daemon(server.socket());
  EXPECT_TRUE(daemon.CheckReachable(absl::Seconds(5)).ok());

  absl::StatusOr<flopscope::v1::ListJobsResponse> listed = daemon.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->jobs_size(), 1);
  EXPECT_EQ(listed->jobs(0).job_id(), "demo-job");

  flopscope::v1::ReportRequest request;
  request.set_job_id("demo-job");
  request.add_ranks(1);
  absl::StatusOr<flopscope::v1::Report> report = daemon.GetReport(request);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->modules_size(), testing::CpuOnlyReport().modules_size());
  EXPECT_EQ(server.last_requested_ranks(), std::vector<int>{1});

  request.set_job_id("other");
  absl::StatusOr<flopscope::v1::Report> missing = daemon.GetReport(request);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "job 'other' not found");

  // The fake does not implement ListRanks: an older daemon is named as such.
  absl::StatusOr<flopscope::v1::ListRanksResponse> ranks = daemon.ListRanks("demo-job");
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(ranks.status().message().find("ListRanks"), std::string::npos);
}

}  // namespace
}  // namespace flopscope::client
