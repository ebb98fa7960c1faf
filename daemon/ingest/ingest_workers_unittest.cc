// The Collector's worker pool (ingest_workers.h): every posted task runs, on as many threads as
// the pool has, and a task that blocks holds up only its own worker.

#include "daemon/ingest/ingest_workers.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace flopscope::daemon {
namespace {

// Counts tasks that arrived; WaitFor waits (boundedly) until `n` have.
class ArrivalCounter {
 public:
  void Arrive() {
    absl::MutexLock lock(&mu_);
    ++arrived_;
  }
  // True when `n` arrived within 10 s.
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    const auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return arrived_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  }

 private:
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(IngestWorkersTest, EveryTaskPostedRunsBeforeThePoolIsGone) {
  std::atomic<int> ran{0};
  {
    IngestWorkers workers(3);
    EXPECT_EQ(workers.threads(), 3);
    for (int i = 0; i < 200; ++i) workers.Post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 200);
}

TEST(IngestWorkersTest, TasksRunSideBySideOnEveryWorker) {
  IngestWorkers workers(4);
  ArrivalCounter arrived;
  absl::Notification release;
  // Each task waits for the release: all four can only arrive if four threads run them at once.
  for (int i = 0; i < 4; ++i) {
    workers.Post([&] {
      arrived.Arrive();
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
    });
  }
  EXPECT_TRUE(arrived.WaitFor(4));
  release.Notify();
}

TEST(IngestWorkersTest, ABlockedTaskHoldsUpOnlyItsOwnWorker) {
  IngestWorkers workers(2);
  absl::Notification slow_disk;
  ArrivalCounter others;
  workers.Post([&slow_disk] { slow_disk.WaitForNotificationWithTimeout(absl::Seconds(10)); });
  for (int i = 0; i < 20; ++i) workers.Post([&others] { others.Arrive(); });
  // The other streams' tasks all run on the second worker while the first still waits.
  EXPECT_TRUE(others.WaitFor(20));
  EXPECT_EQ(workers.queued(), 0u);
  EXPECT_FALSE(slow_disk.HasBeenNotified());
  slow_disk.Notify();
}

TEST(IngestWorkersTest, WorkersAreNamedForTheirJob) {
  std::string name;
  {
    IngestWorkers workers(1);
    workers.Post([&name] {
      char buffer[16] = {};
      pthread_getname_np(pthread_self(), buffer, sizeof(buffer));
      name = buffer;
    });
  }
  EXPECT_EQ(name, kIngestThreadName);
}

}  // namespace
}  // namespace flopscope::daemon
