// Bounded per peer, through a running daemon (reliability campaign row 5a′): streams that never
// send a hello are ended after --hello-timeout-s; one user's streams stop at
// --max-streams-per-uid while that user's and everyone's queries are still answered; and a
// daemon holding silent streams stops within its drain time.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/server/daemon_server.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/collector.grpc.pb.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::daemon {
namespace {

// A Collector stream opened and left silent: what a slowloris client holds.
struct SilentStream {
  std::unique_ptr<v1::Collector::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>> stream;
};

class PeerBoundsTest : public ::testing::Test {
 protected:
  void Start(DaemonOptions options) {
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  }

  std::unique_ptr<SilentStream> OpenSilent() {
    auto silent = std::make_unique<SilentStream>();
    silent->stub = v1::Collector::NewStub(channel_);
    // A bound for the test itself: a daemon that never ends the stream fails it, not hangs it.
    silent->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    silent->stream = silent->stub->Stream(&silent->context);
    return silent;
  }

  // The stream's end, once the daemon ends it: its status code.
  static grpc::StatusCode EndOf(SilentStream& silent) {
    v1::DownMessage down;
    while (silent.stream->Read(&down)) {
    }
    return silent.stream->Finish().error_code();
  }

  grpc::Status ListJobs() {
    auto stub = v1::Query::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListJobsResponse response;
    return stub->ListJobs(&context, {}, &response);
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(PeerBoundsTest, AStreamWithoutAHelloIsEndedAfterTheHelloTimeout) {
  DaemonOptions options = fixtures::TestDaemonOptions(dir_);
  options.hello_timeout = absl::Milliseconds(500);
  Start(options);
  std::unique_ptr<SilentStream> silent = OpenSilent();
  const absl::Time start = absl::Now();
  EXPECT_EQ(EndOf(*silent), grpc::StatusCode::CANCELLED);
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(400));
  EXPECT_LT(took, absl::Seconds(5));
}

TEST_F(PeerBoundsTest, OneUsersStreamsStopAtItsShareAndQueriesAreStillAnswered) {
  DaemonOptions options = fixtures::TestDaemonOptions(dir_);
  options.max_threads = 64;
  options.max_streams_per_uid = 4;
  options.hello_timeout = absl::Seconds(60);  // they stay silent for the whole test
  Start(options);
  std::vector<std::unique_ptr<SilentStream>> held;
  for (int i = 0; i < 4; ++i) held.push_back(OpenSilent());
  // Each of them holds a daemon thread once its call has arrived; give them that moment.
  absl::SleepFor(absl::Milliseconds(300));
  std::unique_ptr<SilentStream> fifth = OpenSilent();
  EXPECT_EQ(EndOf(*fifth), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(fifth->context.GetServerTrailingMetadata().count("flopscope-refusal-reason"), 1u);
  const grpc::Status listed = ListJobs();
  EXPECT_TRUE(listed.ok()) << listed.error_message();
}

TEST_F(PeerBoundsTest, StreamsBeyondMaxStreamsAreRefusedWhateverTheThreads) {
  DaemonOptions options = fixtures::TestDaemonOptions(dir_);
  options.max_threads = 4096;  // threads no longer bound the streams (they hold none)
  options.max_streams = 3;
  options.hello_timeout = absl::Seconds(60);
  Start(options);
  std::vector<std::unique_ptr<SilentStream>> held;
  for (int i = 0; i < 3; ++i) held.push_back(OpenSilent());
  absl::SleepFor(absl::Milliseconds(300));  // admitted by now
  std::unique_ptr<SilentStream> fourth = OpenSilent();
  EXPECT_EQ(EndOf(*fourth), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const auto reason = fourth->context.GetServerTrailingMetadata().find("flopscope-refusal-reason");
  ASSERT_NE(reason, fourth->context.GetServerTrailingMetadata().end());
  EXPECT_NE(std::string(reason->second.data(), reason->second.size()).find("--max-streams"),
            std::string::npos);
}

TEST_F(PeerBoundsTest, ADaemonHoldingSilentStreamsStopsWithinItsDrainTime) {
  DaemonOptions options = fixtures::TestDaemonOptions(dir_);
  options.hello_timeout = absl::Seconds(60);
  options.drain_timeout = absl::Milliseconds(300);
  Start(options);
  std::vector<std::unique_ptr<SilentStream>> held;
  for (int i = 0; i < 40; ++i) held.push_back(OpenSilent());
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (auto& silent : held) EXPECT_NE(EndOf(*silent), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace flopscope::daemon
