// OpenCounterWindow through an in-process daemon, with fake producer processes written here: gRPC
// clients that say hello and then answer (or ignore) the Controls that come down their stream.

#include "daemon/control/profiling_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/server/daemon_server.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/collector.grpc.pb.h"
#include "flopscope/v1/profiling.grpc.pb.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// How a fake process treats a Control.
enum class Behaviour { kAccept, kRefuse, kIgnore, kHangUp };

// One producer process: says hello, then a reader thread answers Controls as told.
class FakeProducer {
 public:
  FakeProducer(v1::Collector::Stub& stub, v1::SessionHello hello, Behaviour behaviour,
               std::string message = "")
      : hello_(std::move(hello)), behaviour_(behaviour), message_(std::move(message)) {
    stream_ = stub.Stream(&context_);
  }

  ~FakeProducer() {
    {
      absl::MutexLock lock(&write_mu_);
      stream_->WritesDone();
    }
    if (reader_.joinable()) reader_.join();
    stream_->Finish().IgnoreError();
  }

  // True once the daemon's Welcome came back and the reader runs.
  bool Connect() {
    v1::UpMessage message;
    *message.mutable_hello() = hello_;
    v1::DownMessage welcome;
    if (!stream_->Write(message) || !stream_->Read(&welcome) || !welcome.has_welcome()) {
      return false;
    }
    reader_ = std::thread([this] { ReadControls(); });
    return true;
  }

  std::vector<v1::Control> controls() {
    absl::MutexLock lock(&controls_mu_);
    return controls_;
  }

 private:
  void ReadControls() {
    v1::DownMessage message;
    while (stream_->Read(&message)) {
      if (!message.has_control()) continue;
      {
        absl::MutexLock lock(&controls_mu_);
        controls_.push_back(message.control());
      }
      if (behaviour_ == Behaviour::kIgnore) continue;
      if (behaviour_ == Behaviour::kHangUp) {
        context_.TryCancel();
        return;
      }
      v1::UpMessage reply;
      reply.mutable_control_reply()->set_id(message.control().id());
      reply.mutable_control_reply()->set_accepted(behaviour_ == Behaviour::kAccept);
      reply.mutable_control_reply()->set_message(message_);
      absl::MutexLock lock(&write_mu_);
      stream_->Write(reply);
    }
  }

  v1::SessionHello hello_;
  const Behaviour behaviour_;
  const std::string message_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>> stream_;
  // A client stream allows one write at a time: the reader's replies and the final WritesDone.
  absl::Mutex write_mu_;
  absl::Mutex controls_mu_;  // the reader appends while the test reads
  std::vector<v1::Control> controls_ ABSL_GUARDED_BY(controls_mu_);
  std::thread reader_;
};

class ProfilingServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = fixtures::TestDaemonOptions(dir_);
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    collector_ = v1::Collector::NewStub(channel_);
    profiling_ = v1::Profiling::NewStub(channel_);
  }

  std::unique_ptr<FakeProducer> Connect(const std::string& job, int rank, Behaviour behaviour,
                                        const std::string& message = "") {
    auto producer = std::make_unique<FakeProducer>(
        *collector_, fixtures::Hello(job, rank, absl::StrCat("s-", job, "-", rank)), behaviour,
        message);
    EXPECT_TRUE(producer->Connect());
    return producer;
  }

  // The stream is listed just after its Welcome is written, so the client may see the Welcome
  // first: wait (bounded, not timed) until the daemon lists `count` sessions of the job.
  void WaitForSessions(const std::string& job, size_t count) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (server_->sessions().SessionsOf(job).size() != count && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    ASSERT_EQ(server_->sessions().SessionsOf(job).size(), count);
  }

  grpc::Status Open(const std::string& job, std::vector<int32_t> ranks, uint32_t steps,
                    v1::OpenCounterWindowResponse* response, uint32_t timeout_ms = 0,
                    const std::string& metric_set = "") {
    v1::OpenCounterWindowRequest request;
    request.set_job_id(job);
    for (int32_t rank : ranks) request.add_ranks(rank);
    request.set_steps(steps);
    request.set_metric_set(metric_set);
    request.set_timeout_ms(timeout_ms);
    grpc::ClientContext context;
    return profiling_->OpenCounterWindow(&context, request, response);
  }

  fixtures::ScopedTempDir dir_;
  DaemonOptions options_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> collector_;
  std::unique_ptr<v1::Profiling::Stub> profiling_;
};

TEST_F(ProfilingServiceTest, EveryConnectedRankAnswersInRankOrder) {
  auto rank1 = Connect("job", 1, Behaviour::kRefuse, "no GPU in this process");
  auto rank0 = Connect("job", 0, Behaviour::kAccept, "counting the next 3 steps");
  WaitForSessions("job", 2);

  v1::OpenCounterWindowResponse response;
  grpc::Status status = Open("job", {}, 3, &response, 0, "cheap");
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.answers_size(), 2);
  EXPECT_EQ(response.answers(0).rank(), 0);
  EXPECT_EQ(response.answers(0).session_id(), "s-job-0");
  EXPECT_TRUE(response.answers(0).accepted());
  EXPECT_EQ(response.answers(0).message(), "counting the next 3 steps");
  EXPECT_EQ(response.answers(1).rank(), 1);
  EXPECT_FALSE(response.answers(1).accepted());
  EXPECT_EQ(response.answers(1).message(), "no GPU in this process");

  ASSERT_EQ(rank0->controls().size(), 1u);
  const v1::Control control = rank0->controls()[0];
  EXPECT_EQ(control.counter_window().steps(), 3u);
  EXPECT_EQ(control.counter_window().metric_set(), "cheap");
  EXPECT_NE(control.id(), rank1->controls().at(0).id());
  EXPECT_EQ(server_->sessions().pending_controls(), 0u);
}

// A reply is shown on a terminal: controls become spaces, and a long one is cut to 1024 bytes
// at a character boundary (here inside the euro sign that straddles byte 1024).
TEST_F(ProfilingServiceTest, RepliesAreBoundedAndPrintable) {
  std::string reply = "ok\x1b[2J\n" + std::string(1015, 'x');  // 1022 bytes
  reply += "\xE2\x82\xAC tail";
  auto rank0 = Connect("job", 0, Behaviour::kAccept, reply);
  WaitForSessions("job", 1);
  v1::OpenCounterWindowResponse response;
  ASSERT_TRUE(Open("job", {}, 1, &response).ok());
  ASSERT_EQ(response.answers_size(), 1);
  EXPECT_EQ(response.answers(0).message(), "ok [2J " + std::string(1015, 'x') + "...");
}

TEST_F(ProfilingServiceTest, OnlyTheListedRanksAreAsked) {
  auto rank0 = Connect("job", 0, Behaviour::kAccept);
  auto rank1 = Connect("job", 1, Behaviour::kAccept);
  WaitForSessions("job", 2);
  v1::OpenCounterWindowResponse response;
  ASSERT_TRUE(Open("job", {1, 1}, 2, &response).ok());
  ASSERT_EQ(response.answers_size(), 1);
  EXPECT_EQ(response.answers(0).rank(), 1);
  EXPECT_TRUE(rank0->controls().empty());
  EXPECT_EQ(rank1->controls().size(), 1u);
}

TEST_F(ProfilingServiceTest, AListedRankThatIsNotConnectedGetsAnAnswerSayingSo) {
  Connect("job", 1, Behaviour::kAccept).reset();  // rank 1 came and went
  WaitForSessions("job", 0);
  auto rank0 = Connect("job", 0, Behaviour::kAccept, "ok");
  WaitForSessions("job", 1);

  v1::OpenCounterWindowResponse response;
  grpc::Status status = Open("job", {5, 1, 0}, 2, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.answers_size(), 3);
  EXPECT_EQ(response.answers(0).rank(), 0);
  EXPECT_TRUE(response.answers(0).accepted());
  EXPECT_EQ(response.answers(1).rank(), 1);
  EXPECT_FALSE(response.answers(1).accepted());
  EXPECT_THAT(response.answers(1).message(), HasSubstr("rank 1 is not connected"));
  EXPECT_EQ(response.answers(2).rank(), 5);
  EXPECT_FALSE(response.answers(2).accepted());
  EXPECT_EQ(response.answers(2).message(), "job 'job' has no rank 5 (ranks: 0-1)");
}

TEST_F(ProfilingServiceTest, ASilentProcessGetsATimeoutAnswer) {
  auto silent = Connect("job", 0, Behaviour::kIgnore);
  auto quick = Connect("job", 1, Behaviour::kAccept, "ok");
  WaitForSessions("job", 2);
  v1::OpenCounterWindowResponse response;
  ASSERT_TRUE(Open("job", {}, 1, &response, /*timeout_ms=*/50).ok());
  ASSERT_EQ(response.answers_size(), 2);
  EXPECT_FALSE(response.answers(0).accepted());
  EXPECT_EQ(response.answers(0).message(), "no reply within 50 ms");
  EXPECT_TRUE(response.answers(1).accepted());
  EXPECT_EQ(silent->controls().size(), 1u);  // it was asked, it just did not answer
  EXPECT_EQ(server_->sessions().pending_controls(), 0u);
}

TEST_F(ProfilingServiceTest, AProcessThatHangsUpGetsAnAnswerWithoutWaitingForTheTimeout) {
  auto leaving = Connect("job", 0, Behaviour::kHangUp);
  WaitForSessions("job", 1);
  v1::OpenCounterWindowResponse response;
  // A minute of timeout: the answer comes when the stream ends, long before.
  ASSERT_TRUE(Open("job", {}, 1, &response, 60000).ok());
  ASSERT_EQ(response.answers_size(), 1);
  EXPECT_FALSE(response.answers(0).accepted());
  EXPECT_THAT(response.answers(0).message(), HasSubstr("stream ended"));
}

TEST_F(ProfilingServiceTest, UnknownJobIsNotFoundAndAJobWithNoLiveRankIsAPrecondition) {
  v1::OpenCounterWindowResponse response;
  grpc::Status status = Open("nope", {}, 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job 'nope' not found");

  Connect("ended", 0, Behaviour::kAccept).reset();
  WaitForSessions("ended", 0);
  status = Open("ended", {}, 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "no rank of job 'ended' is connected");
  status = Open("ended", {0, 3}, 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("rank 0 is not connected"));
  EXPECT_THAT(status.error_message(), HasSubstr("has no rank 3"));
}

TEST_F(ProfilingServiceTest, BadRequestsAreInvalidArguments) {
  auto rank0 = Connect("job", 0, Behaviour::kAccept);
  WaitForSessions("job", 1);
  v1::OpenCounterWindowResponse response;
  grpc::Status status = Open("job", {}, 0, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "steps must be 1 to 1000, got 0");
  status = Open("job", {}, kMaxCounterWindowSteps + 1, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  status = Open("job", {}, 2, &response, 0, "everything");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("metric set 'everything' is not known"));
  status = Open("job", {-1}, 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "rank -1 is negative");
  status = Open("job", {}, 2, &response, kMaxControlTimeoutMs + 1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  status = Open("../job", {}, 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(rank0->controls().empty());  // nothing reached the process
}

TEST(ValidateCounterWindowRequestTest, AcceptsTheDocumentedRange) {
  v1::OpenCounterWindowRequest request;
  request.set_job_id("job-1");
  request.set_steps(kMaxCounterWindowSteps);
  request.set_timeout_ms(kMaxControlTimeoutMs);
  for (const char* set : {"", "full", "cheap"}) {
    request.set_metric_set(set);
    EXPECT_TRUE(ValidateCounterWindowRequest(request).ok()) << set;
  }
  request.set_metric_set("ful");
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateCounterWindowRequest(request)));
}

}  // namespace
}  // namespace flopscope::daemon
