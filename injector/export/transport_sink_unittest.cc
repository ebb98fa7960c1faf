#include "injector/export/transport_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "injector/export/thread_affinity.h"

namespace flopscope::injector {
namespace {

// Runs `f` on a fresh thread and waits for it.
template <typename F>
void OnOtherThread(F f) {
  std::thread(f).join();
}

TEST(ThreadAffinityTest, OwnerThreadPasses) {
  ThreadAffinity affinity;
  affinity.Bind();
  EXPECT_TRUE(affinity.Check("Call"));
  EXPECT_TRUE(affinity.Check("Call"));
  EXPECT_EQ(affinity.refused(), 0u);
}

TEST(ThreadAffinityTest, OtherThreadIsRefusedCountedAndWarnedOnce) {
  ThreadAffinity affinity;
  affinity.Bind();
  testing::internal::CaptureStderr();
  bool first = true, second = true;
  OnOtherThread([&] { first = affinity.Check("Sink::Submit"); });
  OnOtherThread([&] { second = affinity.Check("Sink::Poll"); });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(first);
  EXPECT_FALSE(second);
  EXPECT_EQ(affinity.refused(), 2u);
  // One line, naming the first refused call only.
  EXPECT_EQ(err.rfind("flopscope: Sink::Submit called off the exporter thread", 0), 0u) << err;
  EXPECT_EQ(err.find("Sink::Poll"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
  // The owner still passes afterwards.
  EXPECT_TRUE(affinity.Check("Sink::Submit"));
}

TEST(ThreadAffinityTest, UnboundRefusesEveryThread) {
  ThreadAffinity affinity;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(affinity.Check("Early"));
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(affinity.refused(), 1u);
}

// A sink whose Open ran (and failed: no transport library) on this thread. Calls from another
// thread must be refused before they touch the transport, which does not even exist here: a call
// that got through would crash the test.
TEST(TransportSinkTest, CallsFromAnotherThreadAreRefused) {
  TransportSink sink("/nonexistent/libflopscope_transport.so", "unix:/nonexistent.sock",
                     SessionIdentity{}, "", TransportSink::Limits{});
  std::string error;
  ASSERT_FALSE(sink.Open(&error));
  testing::internal::CaptureStderr();
  fs_batch batch{};
  bool polled = true;
  DeliveryOutcome outcome;
  OnOtherThread([&] {
    sink.Submit(batch, 7);
    fs_control control{};
    polled = sink.PollControl(&control);
    sink.ReplyControl(1, true, "ok");
    outcome = sink.Finish(0);
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(polled);
  EXPECT_EQ(sink.wrong_thread_calls(), 4u);
  // The refused Submit's records are reported, not silently lost.
  EXPECT_EQ(outcome.undelivered_records, 7u);
  EXPECT_NE(outcome.reason.find("off the exporter thread"), std::string::npos);
  EXPECT_NE(err.find("TransportSink::Submit called off the exporter thread"), std::string::npos)
      << err;
}

}  // namespace
}  // namespace flopscope::injector
