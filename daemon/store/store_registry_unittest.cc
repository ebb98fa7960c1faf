// StoreRegistry under concurrent streams: different ranks open their files side by side, two
// streams of one rank share one open, and the prune fence counts an open still under way.
// Reliability campaign rerun, row 4: 64 ranks starting at once waited for each other's opens.

#include "daemon/store/store_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kJob[] = "job";
constexpr absl::Duration kPatience = absl::Seconds(10);  // far above any open on a calm disk

// Opens rank files for a registry, holding every open of `held_rank` until Release(), and
// counting the opens of each rank.
class HeldOpener {
 public:
  explicit HeldOpener(int32_t held_rank) : held_rank_(held_rank) {}

  StoreRegistry::Opener opener() {
    return [this](absl::string_view, int32_t rank, const std::string& path) {
      return Open(rank, path);
    };
  }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }
  int opens(int32_t rank) {
    absl::MutexLock lock(&mu_);
    return opens_[rank];
  }
  // True once `count` opens of `rank` have begun, false after `timeout`.
  bool AwaitOpens(int32_t rank, int count, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (opens(rank) < count) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

 private:
  absl::StatusOr<std::unique_ptr<RankStore>> Open(int32_t rank, const std::string& path) {
    {
      absl::MutexLock lock(&mu_);
      ++opens_[rank];
    }
    if (rank == held_rank_) release_.WaitForNotification();
    return RankStore::Open(path);
  }

  const int32_t held_rank_;
  absl::Notification release_;
  absl::Mutex mu_;
  absl::flat_hash_map<int32_t, int> opens_ ABSL_GUARDED_BY(mu_);
};

class StoreRegistryTest : public ::testing::Test {
 protected:
  // Acquire(kJob, `rank`) on a thread of its own; the result lands in `*out`.
  std::thread AcquireOnThread(int32_t rank, absl::StatusOr<std::shared_ptr<RankStore>>* out) {
    return std::thread([this, rank, out] { *out = stores_.Acquire(kJob, rank); });
  }

  fixtures::ScopedTempDir dir_;
  HeldOpener held_{0};
  StoreRegistry stores_{dir_.path(), {}, held_.opener()};
};

TEST_F(StoreRegistryTest, ASlowOpenOfOneRankDoesNotHoldUpAnother) {
  absl::StatusOr<std::shared_ptr<RankStore>> slow = absl::UnknownError("not run");
  std::thread opening = AcquireOnThread(0, &slow);
  absl::Cleanup join = [&] {
    held_.Release();
    opening.join();
  };
  ASSERT_TRUE(held_.AwaitOpens(0, 1, kPatience));
  // Rank 0's open is under way and held: rank 1 opens its own file meanwhile.
  absl::StatusOr<std::shared_ptr<RankStore>> other = absl::UnknownError("not run");
  absl::Notification other_done;
  std::thread second([&] {
    other = stores_.Acquire(kJob, 1);
    other_done.Notify();
  });
  const bool in_time = other_done.WaitForNotificationWithTimeout(kPatience);
  held_.Release();
  second.join();
  EXPECT_TRUE(in_time) << "rank 1 waited for rank 0's open";
  ASSERT_TRUE(other.ok()) << other.status();
  std::move(join).Invoke();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_NE(slow->get(), other->get());
  EXPECT_EQ(stores_.open_count(), 2u);
}

TEST_F(StoreRegistryTest, TwoStreamsOfOneRankShareOneOpen) {
  absl::StatusOr<std::shared_ptr<RankStore>> first = absl::UnknownError("not run");
  absl::StatusOr<std::shared_ptr<RankStore>> second = absl::UnknownError("not run");
  std::thread a = AcquireOnThread(0, &first);
  ASSERT_TRUE(held_.AwaitOpens(0, 1, kPatience));
  std::thread b = AcquireOnThread(0, &second);
  // A second open of the file would begin now; give it the time to show itself.
  const bool opened_twice = held_.AwaitOpens(0, 2, absl::Milliseconds(200));
  held_.Release();
  a.join();
  b.join();
  EXPECT_FALSE(opened_twice);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(held_.opens(0), 1);
  EXPECT_EQ(stores_.open_count(), 1u);
}

TEST_F(StoreRegistryTest, TheFenceCountsAnOpenUnderWay) {
  absl::StatusOr<std::shared_ptr<RankStore>> store = absl::UnknownError("not run");
  std::thread opening = AcquireOnThread(0, &store);
  absl::Cleanup join = [&] {
    held_.Release();
    opening.join();
  };
  ASSERT_TRUE(held_.AwaitOpens(0, 1, kPatience));
  // Nothing is open yet, but the job is running: the prune is refused, without waiting.
  absl::Status prune = stores_.BeginPrune(kJob);
  EXPECT_TRUE(absl::IsFailedPrecondition(prune)) << prune;
  EXPECT_THAT(std::string(prune.message()), HasSubstr("is running"));
  EXPECT_THAT(stores_.OpenJobs(), UnorderedElementsAre(kJob));
  std::move(join).Invoke();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(stores_.BeginPrune(kJob)));  // held by its stream
  *store = nullptr;                                                   // the stream ends
  EXPECT_TRUE(stores_.OpenJobs().empty());
  ASSERT_TRUE(stores_.BeginPrune(kJob).ok());
  EXPECT_TRUE(absl::IsUnavailable(stores_.Acquire(kJob, 1).status()));
  EXPECT_EQ(held_.opens(1), 0);  // refused before any file was touched
  stores_.EndPrune(kJob);
  EXPECT_TRUE(stores_.Acquire(kJob, 1).ok());
}

TEST_F(StoreRegistryTest, AFailedOpenLeavesNothingBehind) {
  StoreRegistry failing(dir_.path(), {}, [](absl::string_view, int32_t, const std::string&) {
    return absl::StatusOr<std::unique_ptr<RankStore>>(absl::DataLossError("bad file"));
  });
  EXPECT_TRUE(absl::IsDataLoss(failing.Acquire(kJob, 0).status()));
  EXPECT_EQ(failing.open_count(), 0u);
  EXPECT_TRUE(failing.OpenJobs().empty());
  EXPECT_TRUE(failing.BeginPrune(kJob).ok());
}

TEST_F(StoreRegistryTest, AClosedStoreIsOpenedAgain) {
  held_.Release();
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_.Acquire(kJob, 0);
  ASSERT_TRUE(store.ok()) << store.status();
  *store = nullptr;  // the last holder lets go: the file closes
  EXPECT_EQ(stores_.open_count(), 0u);
  ASSERT_TRUE(stores_.Acquire(kJob, 0).ok());
  EXPECT_EQ(held_.opens(0), 2);
}

}  // namespace
}  // namespace flopscope::daemon
