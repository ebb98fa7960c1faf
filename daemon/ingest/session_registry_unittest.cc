// The registry without gRPC: streams are fake writers that record what went down them.

#include "daemon/ingest/session_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What a fake stream received, in order.
class RecordingStream {
 public:
  DownWriter Writer() {
    return [this](const v1::DownMessage& message) {
      absl::MutexLock lock(&mu_);
      if (broken_) return false;
      messages_.push_back(message);
      return true;
    };
  }
  void Break() {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }
  std::vector<v1::DownMessage> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;  // the test thread reads while registry callers write
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::DownMessage> messages_ ABSL_GUARDED_BY(mu_);
};

v1::Control WindowControl(uint32_t steps) {
  v1::Control control;
  control.mutable_counter_window()->set_steps(steps);
  control.mutable_counter_window()->set_metric_set("cheap");
  return control;
}

v1::ControlReply Reply(uint64_t id, bool accepted, const std::string& message) {
  v1::ControlReply reply;
  reply.set_id(id);
  reply.set_accepted(accepted);
  reply.set_message(message);
  return reply;
}

std::vector<int32_t> RanksOf(const std::vector<SessionKey>& keys) {
  std::vector<int32_t> ranks;
  for (const SessionKey& key : keys) ranks.push_back(key.rank);
  return ranks;
}

TEST(SessionRegistryTest, ListsSessionsOfAJobByRankUntilTheyEnd) {
  SessionRegistry registry;
  RecordingStream stream;
  auto rank1 = registry.Register({"job-a", 1, "s1"}, stream.Writer());
  auto rank0 = registry.Register({"job-a", 0, "s0"}, stream.Writer());
  auto other = registry.Register({"job-b", 0, "t0"}, stream.Writer());
  auto prefix = registry.Register({"job-aa", 0, "u0"}, stream.Writer());
  EXPECT_THAT(RanksOf(registry.SessionsOf("job-a")), ElementsAre(0, 1));
  EXPECT_EQ(registry.SessionsOf("job-a")[1].session_id, "s1");
  EXPECT_EQ(registry.size(), 4u);

  EXPECT_TRUE(registry.IsLive({"job-a", 0, "s0"}));
  EXPECT_EQ(registry.Sessions().size(), 4u);

  registry.Unregister(rank0);
  EXPECT_THAT(RanksOf(registry.SessionsOf("job-a")), ElementsAre(1));
  EXPECT_TRUE(registry.SessionsOf("job-c").empty());
  EXPECT_FALSE(registry.IsLive({"job-a", 0, "s0"}));
  EXPECT_EQ(registry.Sessions().size(), 3u);
  EXPECT_EQ(registry.Sessions().front().job_id, "job-a");  // in key order
  EXPECT_FALSE(rank0->Write(v1::DownMessage()));           // closed: nothing more goes down it
  EXPECT_TRUE(rank1->Write(v1::DownMessage()));
}

TEST(SessionRegistryTest, AReconnectReplacesTheStreamAndTheOldOneCannotDelistIt) {
  SessionRegistry registry;
  RecordingStream old_stream, new_stream;
  auto old_session = registry.Register({"job", 0, "s"}, old_stream.Writer());
  auto new_session = registry.Register({"job", 0, "s"}, new_stream.Writer());
  registry.Unregister(old_session);
  ASSERT_EQ(registry.SessionsOf("job").size(), 1u);

  ASSERT_TRUE(registry.Send({"job", 0, "s"}, WindowControl(2)).ok());
  EXPECT_TRUE(old_stream.messages().empty());
  EXPECT_EQ(new_stream.messages().size(), 1u);
}

TEST(SessionRegistryTest, SendWritesAControlWithADaemonWideUniqueId) {
  SessionRegistry registry;
  RecordingStream a, b;
  registry.Register({"job", 0, "s0"}, a.Writer());
  registry.Register({"other", 0, "t0"}, b.Writer());
  auto first = registry.Send({"job", 0, "s0"}, WindowControl(3));
  auto second = registry.Send({"other", 0, "t0"}, WindowControl(4));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*first)->id(), (*second)->id());

  ASSERT_EQ(a.messages().size(), 1u);
  const v1::DownMessage sent = a.messages()[0];
  ASSERT_TRUE(sent.has_control());
  EXPECT_EQ(sent.control().id(), (*first)->id());
  EXPECT_EQ(sent.control().counter_window().steps(), 3u);
  EXPECT_EQ(sent.control().counter_window().metric_set(), "cheap");
  EXPECT_EQ(b.messages()[0].control().id(), (*second)->id());
  EXPECT_EQ(registry.pending_controls(), 2u);
}

TEST(SessionRegistryTest, SendToAnAbsentOrBrokenStreamFails) {
  SessionRegistry registry;
  auto missing = registry.Send({"job", 0, "s0"}, WindowControl(1));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("job job rank 0 session s0 is not connected"));

  RecordingStream stream;
  registry.Register({"job", 0, "s0"}, stream.Writer());
  stream.Break();
  auto broken = registry.Send({"job", 0, "s0"}, WindowControl(1));
  EXPECT_TRUE(absl::IsUnavailable(broken.status())) << broken.status();
  EXPECT_EQ(registry.pending_controls(), 0u);
}

TEST(SessionRegistryTest, RepliesAreMatchedByIdAndStream) {
  SessionRegistry registry;
  RecordingStream stream0, stream1;
  auto session0 = registry.Register({"job", 0, "s0"}, stream0.Writer());
  auto session1 = registry.Register({"job", 1, "s1"}, stream1.Writer());
  auto to0 = registry.Send({"job", 0, "s0"}, WindowControl(2));
  auto to1 = registry.Send({"job", 1, "s1"}, WindowControl(2));
  ASSERT_TRUE(to0.ok() && to1.ok());

  // A stream may only answer what was sent down it, and unknown ids change nothing.
  EXPECT_FALSE(registry.DeliverReply(*session1, Reply((*to0)->id(), true, "spoofed")));
  EXPECT_FALSE(registry.DeliverReply(*session0, Reply(9999, true, "unknown")));
  EXPECT_TRUE(registry.DeliverReply(*session1, Reply((*to1)->id(), false, "no GPU")));
  EXPECT_TRUE(registry.DeliverReply(*session0, Reply((*to0)->id(), true, "counting 2 steps")));
  EXPECT_FALSE(registry.DeliverReply(*session0, Reply((*to0)->id(), true, "twice")));

  absl::StatusOr<v1::ControlReply> reply0 = registry.AwaitReply(*to0, absl::InfiniteFuture());
  absl::StatusOr<v1::ControlReply> reply1 = registry.AwaitReply(*to1, absl::InfiniteFuture());
  ASSERT_TRUE(reply0.ok() && reply1.ok());
  EXPECT_TRUE(reply0->accepted());
  EXPECT_EQ(reply0->message(), "counting 2 steps");
  EXPECT_FALSE(reply1->accepted());
  EXPECT_EQ(reply1->message(), "no GPU");
  EXPECT_EQ(registry.pending_controls(), 0u);
}

TEST(SessionRegistryTest, AReplyFromAnotherThreadWakesTheWaiter) {
  SessionRegistry registry;
  RecordingStream stream;
  auto session = registry.Register({"job", 0, "s0"}, stream.Writer());
  auto pending = registry.Send({"job", 0, "s0"}, WindowControl(1));
  ASSERT_TRUE(pending.ok());
  std::thread handler(
      [&] { registry.DeliverReply(*session, Reply((*pending)->id(), true, "ok")); });
  absl::StatusOr<v1::ControlReply> reply = registry.AwaitReply(*pending, absl::InfiniteFuture());
  handler.join();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->message(), "ok");
}

TEST(SessionRegistryTest, APassedDeadlineGivesUpAndALateReplyIsDropped) {
  SessionRegistry registry;
  RecordingStream stream;
  auto session = registry.Register({"job", 0, "s0"}, stream.Writer());
  auto pending = registry.Send({"job", 0, "s0"}, WindowControl(1));
  ASSERT_TRUE(pending.ok());
  absl::StatusOr<v1::ControlReply> reply = registry.AwaitReply(*pending, absl::InfinitePast());
  EXPECT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
  EXPECT_EQ(registry.pending_controls(), 0u);
  EXPECT_FALSE(registry.DeliverReply(*session, Reply((*pending)->id(), true, "late")));
}

TEST(SessionRegistryTest, AReplyThatArrivedBeforeTheDeadlineCheckStillCounts) {
  SessionRegistry registry;
  RecordingStream stream;
  auto session = registry.Register({"job", 0, "s0"}, stream.Writer());
  auto pending = registry.Send({"job", 0, "s0"}, WindowControl(1));
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(registry.DeliverReply(*session, Reply((*pending)->id(), true, "in time")));
  absl::StatusOr<v1::ControlReply> reply = registry.AwaitReply(*pending, absl::InfinitePast());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->message(), "in time");
}

TEST(SessionRegistryTest, AnEndingStreamFailsItsWaitingControlsOnly) {
  SessionRegistry registry;
  RecordingStream stream0, stream1;
  auto session0 = registry.Register({"job", 0, "s0"}, stream0.Writer());
  registry.Register({"job", 1, "s1"}, stream1.Writer());
  auto to0 = registry.Send({"job", 0, "s0"}, WindowControl(1));
  auto to1 = registry.Send({"job", 1, "s1"}, WindowControl(1));
  ASSERT_TRUE(to0.ok() && to1.ok());
  registry.Unregister(session0);
  absl::StatusOr<v1::ControlReply> reply = registry.AwaitReply(*to0, absl::InfiniteFuture());
  EXPECT_TRUE(absl::IsUnavailable(reply.status())) << reply.status();
  EXPECT_THAT(reply.status().message(), HasSubstr("stream ended"));
  EXPECT_EQ(registry.pending_controls(), 1u);  // rank 1's control still waits
}

// A writer that notices two Writes on its stream at once, as gRPC forbids. It yields inside the
// write so that an unserialised second writer would very likely run into it.
class OverlapDetectingStream {
 public:
  DownWriter Writer() {
    return [this](const v1::DownMessage& message) {
      if (in_flight_.fetch_add(1) != 0) overlaps_.fetch_add(1);
      for (int i = 0; i < 20; ++i) std::this_thread::yield();
      (message.has_control() ? controls_ : acks_).fetch_add(1);
      in_flight_.fetch_sub(1);
      return true;
    };
  }
  int overlaps() const { return overlaps_.load(); }
  int controls() const { return controls_.load(); }
  int acks() const { return acks_.load(); }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<int> overlaps_{0};
  std::atomic<int> controls_{0};
  std::atomic<int> acks_{0};
};

TEST(SessionRegistryTest, AcksAndControlsFromManyThreadsNeverOverlapOnAStream) {
  SessionRegistry registry;
  OverlapDetectingStream stream;
  auto session = registry.Register({"job", 0, "s0"}, stream.Writer());
  constexpr int kPerThread = 200;
  constexpr int kControlThreads = 4;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // the stream's handler, acknowledging batches
    v1::DownMessage ack;
    ack.mutable_ack()->set_committed_seq(1);
    for (int i = 0; i < kPerThread; ++i) session->Write(ack);
  });
  for (int t = 0; t < kControlThreads; ++t) {
    threads.emplace_back([&] {  // Profiling requests
      for (int i = 0; i < kPerThread; ++i) {
        auto pending = registry.Send({"job", 0, "s0"}, WindowControl(1));
        if (pending.ok()) registry.DeliverReply(*session, Reply((*pending)->id(), true, ""));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(stream.overlaps(), 0);
  EXPECT_EQ(stream.acks(), kPerThread);
  EXPECT_EQ(stream.controls(), kControlThreads * kPerThread);
  EXPECT_EQ(registry.pending_controls(), 0u);
}

}  // namespace
}  // namespace flopscope::daemon
