// A forwarded session's stream end to end, against an aggregator served in-process: the outbox
// empties into it, the stream stays open while the session is live on the node, a counter window
// asked of the aggregator reaches the producer's stream on the node and its reply comes back, a
// Control for a producer that is gone is answered at once, and the stream closes once the
// session ended here and everything is acknowledged.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/forwarding/forwarder.h"
#include "daemon/forwarding/outbox.h"
#include "daemon/ingest/session_registry.h"
#include "daemon/server/daemon_server.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "flopscope/v1/profiling.grpc.pb.h"

namespace flopscope::daemon::forwarding {
namespace {

constexpr char kJob[] = "fwd-job";

// The node's producer stream: records the Controls written down it.
class ProducerStream {
 public:
  DownWriter Writer() {
    return [this](const v1::DownMessage& message) {
      absl::MutexLock lock(&mu_);
      if (message.has_control()) controls_.push_back(message.control());
      return true;
    };
  }
  // The first Control, once one came within 10 s.
  std::optional<v1::Control> AwaitControl() {
    absl::MutexLock lock(&mu_);
    const auto some = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !controls_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&some), absl::Seconds(10))) return std::nullopt;
    return controls_.front();
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::Control> controls_ ABSL_GUARDED_BY(mu_);
};

bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

class SessionLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DaemonServer>> aggregator =
        DaemonServer::Start(fixtures::TestDaemonOptions(dir_, "aggregator", "aggregator.sock"));
    ASSERT_TRUE(aggregator.ok()) << aggregator.status();
    aggregator_ = *std::move(aggregator);
    absl::StatusOr<std::unique_ptr<Outbox>> outbox =
        Outbox::Open(dir_.File("outbox.sqlite"), kDefaultOutboxMaxBytes);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    outbox_ = *std::move(outbox);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        UpstreamChannel(aggregator_->target(), {});
    ASSERT_TRUE(channel.ok()) << channel.status();
    ForwarderOptions fast;
    fast.idle_poll = absl::Milliseconds(20);
    forwarder_ = std::make_unique<Forwarder>(outbox_.get(), *channel, &node_, fast);
  }

  void TearDown() override {
    forwarder_.reset();  // before the aggregator it streams to
    aggregator_.reset();
  }

  // Batches 1..n of `hello`'s session committed on the node, each with one range.
  void Put(const v1::SessionHello& hello, int n) {
    for (int seq = 1; seq <= n; ++seq) {
      v1::Batch batch;
      batch.set_seq(seq);
      if (seq == 1) fixtures::AddPath(batch, 1, 0, "layer");
      fixtures::AddRange(batch, 1, seq * 1000, 500);
      const auto owner = []() -> absl::StatusOr<uint32_t> { return geteuid(); };
      ASSERT_TRUE(outbox_->Put(hello, batch, owner).ok());
    }
  }

  int64_t Waiting() { return outbox_->Totals()->pending_batches; }

  absl::StatusOr<v1::OpenCounterWindowResponse> Profile() {
    auto stub = v1::Profiling::NewStub(
        grpc::CreateChannel(aggregator_->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::OpenCounterWindowRequest request;
    request.set_job_id(kJob);
    request.set_steps(2);
    request.set_timeout_ms(10000);
    v1::OpenCounterWindowResponse response;
    const grpc::Status status = stub->OpenCounterWindow(&context, request, &response);
    if (!status.ok()) return absl::UnknownError(status.error_message());
    return response;
  }

  fixtures::ScopedTempDir dir_;
  std::unique_ptr<DaemonServer> aggregator_;
  std::unique_ptr<Outbox> outbox_;
  SessionRegistry node_;  // the node's live producer streams
  std::unique_ptr<Forwarder> forwarder_;
};

TEST_F(SessionLinkTest, ALiveSessionsStreamCarriesBatchesAndRelaysControlsUntilItEnds) {
  const v1::SessionHello hello = fixtures::Hello(kJob, 0, "s0");
  ProducerStream producer;
  std::shared_ptr<LiveSession> live = node_.Register({kJob, 0, "s0"}, producer.Writer());
  Put(hello, 3);
  forwarder_->Start();
  ASSERT_TRUE(Eventually([&] { return Waiting() == 0; }));
  // Everything is acknowledged, and the stream stays open while the producer is connected here.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(forwarder_->connected(), 1);
  EXPECT_EQ(aggregator_->sessions().SessionsOf(kJob).size(), 1u);
  Put(hello, 4);  // a later batch goes up the same stream
  forwarder_->Wake(hello);
  ASSERT_TRUE(Eventually([&] { return Waiting() == 0; }));
  EXPECT_EQ((*outbox_->Find(kJob, 0, "s0"))->acked_seq, 4u);

  // The producer here answers the Control its node relays, under the node's own id.
  std::thread producer_replies([&] {
    std::optional<v1::Control> control = producer.AwaitControl();
    if (!control) return;
    v1::ControlReply reply;
    reply.set_id(control->id());
    reply.set_accepted(control->counter_window().steps() == 2);
    reply.set_message("window at step 7");
    node_.DeliverReply(*live, reply);
  });
  absl::StatusOr<v1::OpenCounterWindowResponse> response = Profile();
  producer_replies.join();
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->answers_size(), 1);
  EXPECT_EQ(response->answers(0).rank(), 0);
  EXPECT_TRUE(response->answers(0).accepted());
  EXPECT_EQ(response->answers(0).message(), "window at step 7");

  // The session ends on the node: with nothing left to send its stream closes.
  node_.Unregister(live);
  ASSERT_TRUE(Eventually([&] { return forwarder_->connected() == 0; }));
  ASSERT_TRUE(Eventually([&] { return aggregator_->sessions().SessionsOf(kJob).empty(); }));
}

TEST_F(SessionLinkTest, AControlThatCannotReachTheProducerIsAnsweredAtOnce) {
  // The producer's stream on the node broke and is not delisted yet: the node's write of the
  // relayed Control fails, and the aggregator hears why rather than waiting for its timeout.
  const v1::SessionHello hello = fixtures::Hello(kJob, 1, "s1");
  std::shared_ptr<LiveSession> broken =
      node_.Register({kJob, 1, "s1"}, [](const v1::DownMessage&) { return false; });
  Put(hello, 1);
  forwarder_->Start();
  ASSERT_TRUE(Eventually([&] { return forwarder_->connected() == 1 && Waiting() == 0; }));
  const absl::Time asked = absl::Now();
  absl::StatusOr<v1::OpenCounterWindowResponse> response = Profile();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));  // not the 10 s timeout
  ASSERT_EQ(response->answers_size(), 1);
  EXPECT_EQ(response->answers(0).rank(), 1);
  EXPECT_FALSE(response->answers(0).accepted());
  EXPECT_NE(response->answers(0).message().find("rank 1 is not connected to its node daemon"),
            std::string::npos)
      << response->answers(0).message();
  node_.Unregister(broken);
  ASSERT_TRUE(Eventually([&] { return forwarder_->connected() == 0; }));
}

}  // namespace
}  // namespace flopscope::daemon::forwarding
