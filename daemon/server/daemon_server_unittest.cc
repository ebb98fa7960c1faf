// The daemon in-process, spoken to by real gRPC clients over a unix socket in a temp dir.

#include "daemon/server/daemon_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/collector.grpc.pb.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::daemon {
namespace {

using fixtures::AddKernel;
using fixtures::AddPath;
using fixtures::AddString;
using ::testing::HasSubstr;

// One producer process: a Collector stream with its hello.
class Producer {
 public:
  Producer(v1::Collector::Stub& stub, v1::SessionHello hello) : hello_(std::move(hello)) {
    stream_ = stub.Stream(&context_);
  }

  // Sends the hello; returns the Welcome's committed_seq, or -1 when none came.
  int64_t Hello() {
    v1::UpMessage message;
    *message.mutable_hello() = hello_;
    if (!stream_->Write(message)) return -1;
    v1::DownMessage reply;
    if (!stream_->Read(&reply) || !reply.has_welcome()) return -1;
    EXPECT_EQ(reply.welcome().daemon_version(), kVersion);
    return static_cast<int64_t>(reply.welcome().committed_seq());
  }

  // Sends a batch; returns the Ack's committed_seq, or -1 when the stream ended instead.
  int64_t Send(const v1::Batch& batch) {
    v1::UpMessage message;
    *message.mutable_batch() = batch;
    if (!stream_->Write(message)) return -1;
    v1::DownMessage reply;
    if (!stream_->Read(&reply) || !reply.has_ack()) return -1;
    return static_cast<int64_t>(reply.ack().committed_seq());
  }

  void SendRaw(const v1::UpMessage& message) { stream_->Write(message); }

  grpc::Status Finish() {
    stream_->WritesDone();
    v1::DownMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }

  std::string RejectedSeq() const {
    const auto& trailers = context_.GetServerTrailingMetadata();
    auto it = trailers.find(kRejectedSeqKey);
    return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
  }

 private:
  v1::SessionHello hello_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>> stream_;
};

// Batch `seq` of a session: the first one defines a path and a kernel name.
v1::Batch KernelBatch(uint64_t seq, int kernels) {
  v1::Batch batch;
  batch.set_seq(seq);
  if (seq == 1) {
    AddString(batch, 1, "sgemm");
    AddPath(batch, 1, 0, "model");
  }
  for (int i = 0; i < kernels; ++i)
    AddKernel(batch, 1, 1, static_cast<int64_t>(seq) * 1000 + i * 10, 5);
  return batch;
}

class DaemonServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = fixtures::TestDaemonOptions(dir_);
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    collector_ = v1::Collector::NewStub(channel_);
    query_ = v1::Query::NewStub(channel_);
  }

  grpc::Status Report(const std::string& job, std::vector<int32_t> ranks, v1::Report* report) {
    grpc::ClientContext context;
    v1::ReportRequest request;
    request.set_job_id(job);
    for (int32_t rank : ranks) request.add_ranks(rank);
    return query_->GetReport(&context, request, report);
  }

  uint64_t StoredKernels(const std::string& job) {
    v1::Report report;
    grpc::Status status = Report(job, {}, &report);
    EXPECT_TRUE(status.ok()) << status.error_message();
    uint64_t kernels = 0;
    for (const v1::ModuleStats& module : report.modules()) {
      if (module.depth() == 0) kernels += module.kernels();
    }
    return kernels;
  }

  fixtures::ScopedTempDir dir_;
  DaemonOptions options_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> collector_;
  std::unique_ptr<v1::Query::Stub> query_;
};

TEST_F(DaemonServerTest, BatchesAreCommittedAndAcknowledged) {
  Producer producer(*collector_, fixtures::Hello("job-a", 0, "s-a0"));
  ASSERT_EQ(producer.Hello(), 0);
  EXPECT_EQ(producer.Send(KernelBatch(1, 3)), 1);
  EXPECT_EQ(producer.Send(KernelBatch(2, 4)), 2);
  EXPECT_TRUE(producer.Finish().ok());

  EXPECT_TRUE(std::filesystem::exists(options_.data_dir + "/jobs/job-a/rank-00000.sqlite"));
  EXPECT_EQ(StoredKernels("job-a"), 7u);

  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(query_->ListJobs(&context, v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).job_id(), "job-a");
  EXPECT_EQ(jobs.jobs(0).kernels(), 7u);
  EXPECT_EQ(jobs.jobs(0).connected_sessions(), 0u);  // the stream has ended
}

// Threads of this process (the daemon runs in it): /proc/self/task.
int ThreadsOfThisProcess() {
  int threads = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++threads;
  }
  return threads;
}

TEST_F(DaemonServerTest, OpenStreamsHoldNoThreadAndEachCarriesOn) {
  constexpr int kStreams = 64;
  const int before = ThreadsOfThisProcess();
  std::vector<std::unique_ptr<Producer>> producers;
  for (int rank = 0; rank < kStreams; ++rank) {
    producers.push_back(std::make_unique<Producer>(
        *collector_, fixtures::Hello("many", rank, "s-many-" + std::to_string(rank))));
    ASSERT_EQ(producers.back()->Hello(), 0) << rank;
  }
  // 64 welcomed streams wait for their next message: the callback API holds no thread for them
  // (the synchronous server held one each). gRPC's pools may grow by a few under the load.
  EXPECT_LT(ThreadsOfThisProcess() - before, kStreams / 4);
  for (auto& producer : producers) EXPECT_EQ(producer->Send(KernelBatch(1, 2)), 1);
  for (auto& producer : producers) EXPECT_TRUE(producer->Finish().ok());
  EXPECT_EQ(StoredKernels("many"), 2u * kStreams);
}

TEST_F(DaemonServerTest, ARestartedDaemonOpensRecentRankFilesForReportsInTheBackground) {
  for (int32_t rank : {0, 1, 2}) {
    Producer producer(*collector_, fixtures::Hello("job-w", rank, "s-w" + std::to_string(rank)));
    ASSERT_EQ(producer.Hello(), 0);
    EXPECT_EQ(producer.Send(KernelBatch(1, 2)), 1);
    EXPECT_TRUE(producer.Finish().ok());
  }
  server_.reset();  // shuts down: every store and reader closed
  absl::StatusOr<std::unique_ptr<DaemonServer>> restarted = DaemonServer::Start(options_);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  server_ = *std::move(restarted);
  // A wait, not a timing assertion: the warm-up thread gets up to 30 s to open three files.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server_->query_service().idle_readers() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(server_->query_service().idle_readers(), 3u);
  channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  query_ = v1::Query::NewStub(channel_);
  EXPECT_EQ(StoredKernels("job-w"), 6u);  // served by the warmed connections
  EXPECT_EQ(server_->query_service().idle_readers(), 3u);
}

TEST_F(DaemonServerTest, FirstMessageMustBeAHello) {
  grpc::ClientContext context;
  auto stream = collector_->Stream(&context);
  v1::UpMessage message;
  *message.mutable_batch() = KernelBatch(1, 1);
  stream->Write(message);
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("must be a SessionHello, got a Batch"));
}

TEST_F(DaemonServerTest, BadHellosTouchNothing) {
  v1::SessionHello old_protocol = fixtures::Hello("job-b", 0, "s");
  old_protocol.set_protocol_version(0);
  Producer first(*collector_, old_protocol);
  EXPECT_EQ(first.Hello(), -1);
  grpc::Status status = first.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("protocol version 0 is not supported"));

  Producer second(*collector_, fixtures::Hello("../escape", 0, "s"));
  EXPECT_EQ(second.Hello(), -1);
  status = second.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("job id"));
  EXPECT_FALSE(std::filesystem::exists(options_.data_dir + "/jobs"));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("escape")));
}

TEST_F(DaemonServerTest, BadBatchEndsOnlyItsOwnStream) {
  Producer bad(*collector_, fixtures::Hello("job-c", 0, "s-c0"));
  Producer good(*collector_, fixtures::Hello("job-c", 1, "s-c1"));
  ASSERT_EQ(bad.Hello(), 0);
  ASSERT_EQ(good.Hello(), 0);
  ASSERT_EQ(bad.Send(KernelBatch(1, 2)), 1);
  v1::Batch invalid = KernelBatch(2, 5);
  AddKernel(invalid, 42, 1, 0, 1);  // path 42 was never defined
  EXPECT_EQ(bad.Send(invalid), -1);
  grpc::Status status = bad.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("batch seq 2: kernels[5]: path_id 42"));
  EXPECT_EQ(bad.RejectedSeq(), "2");

  EXPECT_EQ(good.Send(KernelBatch(1, 3)), 1);  // the other stream carries on
  EXPECT_TRUE(good.Finish().ok());
  v1::Report report;
  ASSERT_TRUE(Report("job-c", {0}, &report).ok());
  EXPECT_EQ(report.modules(0).kernels(), 2u);  // nothing of the rejected batch
  ASSERT_TRUE(Report("job-c", {1}, &report).ok());
  EXPECT_EQ(report.modules(0).kernels(), 3u);
}

TEST_F(DaemonServerTest, ReconnectResumesAndDuplicatesAreIgnored) {
  const v1::SessionHello hello = fixtures::Hello("job-d", 0, "s-d0");
  {
    Producer producer(*collector_, hello);
    ASSERT_EQ(producer.Hello(), 0);
    ASSERT_EQ(producer.Send(KernelBatch(1, 1)), 1);
    ASSERT_EQ(producer.Send(KernelBatch(2, 2)), 2);
    EXPECT_TRUE(producer.Finish().ok());
  }
  Producer again(*collector_, hello);
  EXPECT_EQ(again.Hello(), 2);
  EXPECT_EQ(again.Send(KernelBatch(2, 2)), 2);  // resent after the reconnect: acked, not stored
  EXPECT_EQ(again.Send(KernelBatch(3, 4)), 3);
  EXPECT_TRUE(again.Finish().ok());
  EXPECT_EQ(StoredKernels("job-d"), 1u + 2u + 4u);
}

TEST_F(DaemonServerTest, QueryErrorsNameTheProblem) {
  v1::Report report;
  grpc::Status status = Report("nope", {}, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job 'nope' not found");

  status = Report("bad/job", {}, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  for (int rank : {0, 1}) {
    Producer producer(*collector_, fixtures::Hello("job-e", rank, "s-e" + std::to_string(rank)));
    ASSERT_EQ(producer.Hello(), 0);
    EXPECT_TRUE(producer.Finish().ok());
  }
  status = Report("job-e", {0, 3}, &report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job 'job-e' has no rank 3 (ranks: 0-1)");

  grpc::ClientContext context;
  v1::ListRanksRequest request;
  request.set_job_id("missing");
  v1::ListRanksResponse ranks;
  EXPECT_EQ(query_->ListRanks(&context, request, &ranks).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonServerTest, SocketIsReachableAndExclusive) {
  struct stat info;
  ASSERT_EQ(stat(options_.socket_path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  // Every user's job must reach it; who may do what is decided per call (access_policy.h).
  EXPECT_EQ(info.st_mode & 0777, 0666u);

  DaemonOptions second = options_;
  second.data_dir = dir_.File("other-data");
  absl::StatusOr<std::unique_ptr<DaemonServer>> rival = DaemonServer::Start(second);
  ASSERT_FALSE(rival.ok());
  EXPECT_EQ(rival.status().message(),
            "another flopscoped is already serving " + options_.socket_path);

  server_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(options_.socket_path));
}

TEST_F(DaemonServerTest, StaleSocketIsReplaced) {
  server_->Shutdown();
  // A socket file nobody listens on, as a crashed daemon leaves behind.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, options_.socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  close(fd);
  ASSERT_TRUE(std::filesystem::exists(options_.socket_path));

  absl::StatusOr<std::unique_ptr<DaemonServer>> restarted = DaemonServer::Start(options_);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto channel = grpc::CreateChannel((*restarted)->target(), grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  EXPECT_TRUE(v1::Query::NewStub(channel)->ListJobs(&context, {}, &jobs).ok());
}

TEST_F(DaemonServerTest, ShutdownEndsOpenStreamsAndKeepsTheirData) {
  Producer producer(*collector_, fixtures::Hello("job-f", 0, "s-f0"));
  ASSERT_EQ(producer.Hello(), 0);
  ASSERT_EQ(producer.Send(KernelBatch(1, 6)), 1);
  server_->Shutdown();  // the stream is still open: drained, then cancelled
  EXPECT_FALSE(producer.Finish().ok());

  absl::StatusOr<std::unique_ptr<DaemonServer>> restarted = DaemonServer::Start(options_);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  absl::StatusOr<v1::Report> report = (*restarted)->query_service().BuildReport([] {
    v1::ReportRequest request;
    request.set_job_id("job-f");
    return request;
  }());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->modules(0).kernels(), 6u);
  EXPECT_FALSE(report->ranks(0).connected());
}

TEST_F(DaemonServerTest, LoopbackTcpServesToo) {
  server_->Shutdown();
  DaemonOptions tcp = options_;
  tcp.tcp_address = "127.0.0.1:0";
  tcp.insecure_loopback_tcp = true;
  absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(tcp);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_THAT((*server)->tcp_target(), HasSubstr("127.0.0.1:"));
  EXPECT_NE((*server)->tcp_target(), "127.0.0.1:0");
  auto channel = grpc::CreateChannel((*server)->tcp_target(), grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  EXPECT_TRUE(v1::Query::NewStub(channel)->ListJobs(&context, {}, &jobs).ok());
}

}  // namespace
}  // namespace flopscope::daemon
