// The published range stacks `flopscope where` reads: consistent copies while the owner thread
// pushes and pops (the seqlock of open_stacks.h), and what RangeTracker::ReadOpenStacks reports.
#include "injector/ranges/open_stacks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "injector/ranges/range_tracker.h"

namespace flopscope::injector {
namespace {

// Slot i of stack generation g holds path 1000 * g + i + 1, started at 7 times its path, tagged
// with a number never used before: a copy that mixes two writes breaks one of these.
uint64_t PathAt(uint32_t generation, uint32_t index) { return 1000u * generation + index + 1; }
int64_t StartOf(uint64_t path) { return static_cast<int64_t>(path) * 7; }

void CheckConsistent(const ThreadOpenStacks& read) {
  ASSERT_LE(read.modules.size(), OpenStacks::kReportedPerStack);
  ASSERT_EQ(read.modules.size(), std::min(read.module_depth, OpenStacks::kReportedPerStack));
  if (read.modules.empty()) return;
  const uint32_t generation = static_cast<uint32_t>((read.modules[0].path_id - 1) / 1000);
  for (const OpenRangeEntry& entry : read.modules) {
    EXPECT_EQ(entry.start_ns, StartOf(entry.path_id));
    EXPECT_EQ((entry.path_id - 1) / 1000, generation) << "slots of two different stacks";
  }
  EXPECT_EQ(read.modules.back().path_id, PathAt(generation, read.module_depth - 1));
}

TEST(OpenStacksTest, ReaderNeverSeesAMixOfTwoWrites) {
  OpenStacks stacks;
  std::atomic<bool> stop{false};
  // The owner rebuilds the stack over and over: pops to 0, pushes back to a depth that varies,
  // each generation with its own paths, as RangeTracker publishes pushes and pops.
  std::thread owner([&] {
    uint64_t next_tag = 1;
    std::vector<uint64_t> tags;
    for (uint32_t generation = 0; !stop.load(std::memory_order_relaxed); ++generation) {
      const uint32_t depth = 1 + generation % 24;
      for (uint32_t i = 0; i < depth; ++i) {
        const uint64_t path = PathAt(generation % 1000, i);
        tags.push_back(next_tag++);
        stacks.Publish(OpenStacks::Stack::kModules, i, tags.back(), i == 0 ? 0 : tags[i - 1], path,
                       StartOf(path));
        stacks.SetDepth(OpenStacks::Stack::kModules, i + 1);
      }
      for (uint32_t i = depth; i > 0; --i) {
        tags.pop_back();
        stacks.SetDepth(OpenStacks::Stack::kModules, i - 1);
      }
    }
  });
  // Reads for a while (the owner is surely running meanwhile), until many stacks were seen.
  int consistent = 0;
  std::set<uint64_t> stacks_seen;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until || stacks_seen.size() < 10) {
    ThreadOpenStacks read;
    if (!stacks.Read(&read)) continue;
    ++consistent;
    CheckConsistent(read);
    if (HasFailure()) break;
    if (!read.modules.empty()) stacks_seen.insert((read.modules[0].path_id - 1) / 1000);
  }
  stop = true;
  owner.join();
  EXPECT_GT(consistent, 0) << "every read collided with a write";
}

TEST(OpenStacksTest, DeepStackKeepsOutermostAndInnermost) {
  OpenStacks stacks;
  constexpr uint32_t kDepth = 40;
  for (uint32_t i = 0; i < kDepth; ++i) {
    stacks.Publish(OpenStacks::Stack::kPhases, i, 500 + i, i == 0 ? 0 : 500 + i - 1, i + 1,
                   100 + i);
  }
  stacks.SetDepth(OpenStacks::Stack::kPhases, kDepth);
  ThreadOpenStacks read;
  ASSERT_TRUE(stacks.Read(&read));
  EXPECT_TRUE(read.modules.empty());
  EXPECT_EQ(read.phase_depth, kDepth);
  ASSERT_EQ(read.phases.size(), OpenStacks::kReportedPerStack);
  EXPECT_EQ(read.phases.front(), (OpenRangeEntry{1, 100}));
  // Then the innermost 15, in order.
  for (uint32_t k = 1; k < OpenStacks::kReportedPerStack; ++k) {
    const uint32_t index = kDepth - OpenStacks::kReportedPerStack + k;
    EXPECT_EQ(read.phases[k], (OpenRangeEntry{index + 1, 100 + int64_t{index}}));
  }
}

TEST(OpenStacksTest, ASlotThatDoesNotChainIsNeverTaken) {
  OpenStacks stacks;
  stacks.Publish(OpenStacks::Stack::kModules, 0, 10, 0, 1, 100);
  stacks.Publish(OpenStacks::Stack::kModules, 1, 12, 11, 2, 200);  // below names another tag
  stacks.SetDepth(OpenStacks::Stack::kModules, 2);
  ThreadOpenStacks read;
  EXPECT_FALSE(stacks.Read(&read)) << "a stale slot above a rewritten one";
  stacks.Publish(OpenStacks::Stack::kModules, 1, 13, 10, 3, 300);
  ASSERT_TRUE(stacks.Read(&read));
  EXPECT_EQ(read.modules, (std::vector<OpenRangeEntry>{{1, 100}, {3, 300}}));
}

// A tracker with what it needs, leaked like range_tracker_unittest's (threads outlive tests).
struct WhereHarness {
  WhereHarness()
      : clock(RangeClock::Source::kRealtime),
        buffers(64 << 20, &losses),
        tracker(&clock, &paths, &buffers, &losses) {
    flopscope = domains.Create("flopscope");
    other = domains.Create("other");
  }
  // "Model/layer.0" for a path id.
  std::string PathOf(uint64_t id) {
    std::vector<PathDefinition> defs;
    paths.TakeNewDefinitions(&defs);
    for (auto& def : defs) known[def.id] = def;
    std::string path;
    while (id != 0) {
      const PathDefinition& def = known.at(id);
      path = path.empty() ? def.name : def.name + "/" + path;
      id = def.parent_id;
    }
    return path;
  }
  std::vector<std::string> Names(const std::vector<OpenRangeEntry>& entries) {
    std::vector<std::string> names;
    for (const OpenRangeEntry& entry : entries) names.push_back(PathOf(entry.path_id));
    return names;
  }

  LossCounters losses;
  RangeClock clock;
  DomainRegistry domains;
  PathTable paths;
  BufferRegistry buffers;
  RangeTracker tracker;
  const Domain* flopscope;
  const Domain* other;
  std::map<uint64_t, PathDefinition> known;
};

// Runs `body` on a thread of its own, then keeps the thread alive (its ranges open) until
// `release` is called.
class HeldThread {
 public:
  explicit HeldThread(
      std::function<void()> body, std::function<void()> after = [] {}) {
    thread_ = std::thread([this, body, after] {
      body();
      std::unique_lock<std::mutex> lock(mu_);
      ready_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
      after();
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ready_; });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  bool released_ = false;
  std::thread thread_;
};

TEST(OpenStacksTest, TrackerReportsEachThreadsOpenRanges) {
  WhereHarness& h = *new WhereHarness();
  const Domain* d = h.domains.Default();
  const int64_t before = RangeClock::RealtimeNs();
  HeldThread held(
      [&] {
        h.tracker.Push(h.flopscope, "step");
        h.tracker.Push(h.flopscope, "forward");
        h.tracker.Push(d, "Model");
        h.tracker.Push(d, "layer.0");
      },
      [&] {
        h.tracker.Pop(d);
        h.tracker.Pop(d);
        h.tracker.Pop(h.flopscope);
        h.tracker.Pop(h.flopscope);
      });
  std::vector<ThreadOpenStacks> open;
  h.tracker.ReadOpenStacks(&open);
  ASSERT_EQ(open.size(), 1u);
  const ThreadOpenStacks& thread = open[0];
  EXPECT_NE(thread.thread_id, static_cast<uint64_t>(gettid()));
  EXPECT_EQ(h.Names(thread.modules), (std::vector<std::string>{"Model", "Model/layer.0"}));
  EXPECT_EQ(h.Names(thread.phases), (std::vector<std::string>{"step", "step/forward"}));
  EXPECT_EQ(thread.module_depth, 2u);
  EXPECT_EQ(thread.phase_depth, 2u);
  // Raw readings of a realtime clock: pushed in order, after `before`.
  EXPECT_GE(thread.phases[0].start_ns, before);
  EXPECT_LE(thread.phases[0].start_ns, thread.phases[1].start_ns);
  EXPECT_LE(thread.phases[1].start_ns, thread.modules[0].start_ns);
  EXPECT_LE(thread.modules[0].start_ns, thread.modules[1].start_ns);
  held.Release();
  h.tracker.ReadOpenStacks(&open);
  EXPECT_TRUE(open.empty()) << "the thread popped everything and exited";
}

TEST(OpenStacksTest, PopFromUnderAnotherDomainShiftsThePublishedStack) {
  WhereHarness& h = *new WhereHarness();
  const Domain* d = h.domains.Default();
  HeldThread held(
      [&] {
        h.tracker.Push(h.other, "outer");
        h.tracker.Push(d, "inner");
        h.tracker.Pop(h.other);  // NVTX keeps a stack per domain: `outer` closes under `inner`
      },
      [&] { h.tracker.Pop(d); });
  std::vector<ThreadOpenStacks> open;
  h.tracker.ReadOpenStacks(&open);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(h.Names(open[0].modules), (std::vector<std::string>{"outer/inner"}));
  EXPECT_EQ(open[0].module_depth, 1u);
  held.Release();
}

TEST(OpenStacksTest, NothingOpenReportsNoThread) {
  WhereHarness& h = *new WhereHarness();
  const Domain* d = h.domains.Default();
  h.tracker.Push(d, "Model");
  h.tracker.Pop(d);
  std::vector<ThreadOpenStacks> open;
  h.tracker.ReadOpenStacks(&open);
  EXPECT_TRUE(open.empty());
}

}  // namespace
}  // namespace flopscope::injector
