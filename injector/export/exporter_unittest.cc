#include "injector/export/exporter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "injector/ranges/range_tracker.h"

namespace flopscope::injector {
namespace {

struct CopiedBatch {
  std::vector<std::string> path_names;
  std::vector<uint64_t> path_ids;
  std::vector<fs_range_event> ranges;
  std::vector<std::string> metadata_keys;
  std::map<uint32_t, uint64_t> losses;
  bool final = false;
  // Batch.open_ranges: present or not, each thread's module path ids and starts.
  bool has_open = false;
  int64_t open_time_ns = 0;
  std::vector<std::vector<fs_open_range>> open_modules;
};

// Keeps deep copies of what the exporter submits (views die after Submit).
class RecordingSink : public BatchSink {
 public:
  struct Shared {
    std::mutex mutex;
    std::vector<CopiedBatch> batches;
    std::vector<std::pair<uint64_t, bool>> replies;
    std::vector<std::string> reply_messages;
    std::vector<fs_control> controls;
    bool finished = false;
  };
  RecordingSink(std::shared_ptr<Shared> shared, bool opens) : shared_(shared), opens_(opens) {}

  bool Open(std::string* error) override {
    if (!opens_) *error = "recording sink told to fail";
    return opens_;
  }
  void Submit(const fs_batch& batch, uint64_t /*records*/) override {
    CopiedBatch copy;
    for (uint32_t i = 0; i < batch.num_paths; ++i) {
      copy.path_names.emplace_back(batch.paths[i].name.data, batch.paths[i].name.size);
      copy.path_ids.push_back(batch.paths[i].id);
    }
    copy.ranges.assign(batch.ranges, batch.ranges + batch.num_ranges);
    for (uint32_t i = 0; i < batch.num_metadata; ++i) {
      copy.metadata_keys.emplace_back(batch.metadata[i].key.data, batch.metadata[i].key.size);
    }
    for (uint32_t i = 0; i < batch.num_losses; ++i) {
      copy.losses[batch.losses[i].cause] = batch.losses[i].records;
    }
    copy.final = batch.final != 0;
    copy.has_open = batch.has_open_ranges != 0;
    copy.open_time_ns = batch.open_ranges_time_ns;
    for (uint32_t i = 0; i < batch.num_open_threads; ++i) {
      const fs_thread_open_ranges& thread = batch.open_threads[i];
      copy.open_modules.emplace_back(thread.modules, thread.modules + thread.num_modules);
    }
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->batches.push_back(std::move(copy));
  }
  DeliveryOutcome Finish(uint32_t) override {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->finished = true;
    return {};
  }
  bool PollControl(fs_control* out) override {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->controls.empty()) return false;
    *out = shared_->controls.back();
    shared_->controls.pop_back();
    return true;
  }
  void ReplyControl(uint64_t id, bool accepted, std::string_view message) override {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->replies.emplace_back(id, accepted);
    shared_->reply_messages.emplace_back(message);
  }
  std::string Destination() const override { return "recording"; }

 private:
  std::shared_ptr<Shared> shared_;
  bool opens_;
};

// Leaked on purpose, like the injector's session (threads may outlive a test's scope).
using WindowRequests = std::function<ControlAnswer(uint32_t, std::string_view, uint64_t)>;

struct World {
  // `open_ranges_ms` > 0: snapshots of the tracker's open ranges at most that often.
  explicit World(uint64_t budget, bool sink_opens = true, WindowRequests windows = nullptr,
                 uint32_t open_ranges_ms = 0)
      : clock(RangeClock::Detect()),
        buffers(budget, &losses),
        tracker(&clock, &paths, &buffers, &losses) {
    shared = std::make_shared<RecordingSink::Shared>();
    Exporter::Options options;
    options.flush_ms = 10;
    options.exit_timeout_ms = 1000;
    options.open_ranges_interval_ms = open_ranges_ms;
    std::function<void(std::vector<ThreadOpenStacks>*)> open_stacks = nullptr;
    if (open_ranges_ms > 0) {
      open_stacks = [this](std::vector<ThreadOpenStacks>* out) { tracker.ReadOpenStacks(out); };
    }
    exporter =
        std::make_unique<Exporter>(options,
                                   Exporter::Sources{&paths, &strings, &buffers, &losses, &clock,
                                                     [this] { return tracker.CountOpenRanges(); },
                                                     nullptr, std::move(windows), open_stacks},
                                   std::make_unique<RecordingSink>(shared, sink_opens));
  }
  LossCounters losses;
  RangeClock clock;
  DomainRegistry domains;
  PathTable paths;
  StringTable strings;
  BufferRegistry buffers;
  RangeTracker tracker;
  std::shared_ptr<RecordingSink::Shared> shared;
  std::unique_ptr<Exporter> exporter;
};

TEST(ExporterTest, FinalBatchCarriesEverythingAndOpenRangesAreCounted) {
  World& w = *new World(64 << 20);
  w.exporter->Start();
  const Domain* d = w.domains.Default();
  w.tracker.Push(d, "Model");
  w.tracker.Push(d, "fc");
  w.tracker.Pop(d);
  w.tracker.Mark(w.domains.Create("flopscope"), "batch_size=4");
  w.exporter->Stop();  // "Model" is still open
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  ASSERT_TRUE(w.shared->finished);
  ASSERT_FALSE(w.shared->batches.empty());
  const CopiedBatch& last = w.shared->batches.back();
  EXPECT_TRUE(last.final);
  EXPECT_EQ(last.losses.at(7), 1u);  // UNCLOSED_RANGE
  std::vector<std::string> names;
  size_t ranges = 0, metadata = 0;
  for (const CopiedBatch& batch : w.shared->batches) {
    names.insert(names.end(), batch.path_names.begin(), batch.path_names.end());
    ranges += batch.ranges.size();
    metadata += batch.metadata_keys.size();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Model", "fc"}));
  EXPECT_EQ(ranges, 1u);
  EXPECT_EQ(metadata, 1u);
  EXPECT_EQ(w.exporter->stats().records, 2u);
}

// The snapshots of `flopscope where`: sent when the open ranges changed, at most once an
// interval, with no other records in the batch if need be; the last batch says nothing is open.
TEST(ExporterTest, OpenRangesAreSentWhenTheyChangeAndClearedAtExit) {
  constexpr uint32_t kIntervalMs = 30;
  World& w = *new World(64 << 20, true, nullptr, kIntervalMs);
  const Domain* d = w.domains.Default();
  const int64_t before = RangeClock::RealtimeNs();
  w.tracker.Push(d, "Model");
  w.exporter->Start();
  auto snapshots = [&w] {
    std::vector<CopiedBatch> found;
    std::lock_guard<std::mutex> lock(w.shared->mutex);
    for (const CopiedBatch& batch : w.shared->batches) {
      if (batch.has_open) found.push_back(batch);
    }
    return found;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (snapshots().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Unchanged for many intervals: nothing more is sent.
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * kIntervalMs));
  std::vector<CopiedBatch> sent = snapshots();
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].open_modules.size(), 1u);
  ASSERT_EQ(sent[0].open_modules[0].size(), 1u);
  const fs_open_range model = sent[0].open_modules[0][0];
  std::vector<PathDefinition> defs;
  {
    std::lock_guard<std::mutex> lock(w.shared->mutex);
    ASSERT_EQ(w.shared->batches.front().path_names.front(), "Model");
    EXPECT_EQ(model.path_id, w.shared->batches.front().path_ids.front());
  }
  // Realtime nanoseconds, within the conversion's jitter.
  EXPECT_GE(model.start_ns, before - 1000000);
  EXPECT_LE(model.start_ns, sent[0].open_time_ns);
  // A change is sent: now nothing is open.
  w.tracker.Pop(d);
  const auto second = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (snapshots().size() < 2 && std::chrono::steady_clock::now() < second) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  sent = snapshots();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[1].open_modules.empty());
  EXPECT_GE(sent[1].open_time_ns, sent[0].open_time_ns + int64_t{kIntervalMs} * 1000000);
  w.tracker.Push(d, "left open");
  w.exporter->Stop();
  sent = snapshots();
  ASSERT_FALSE(sent.empty());
  EXPECT_TRUE(sent.back().final);
  EXPECT_TRUE(sent.back().open_modules.empty()) << "the last batch says nothing is open";
}

TEST(ExporterTest, TimestampsLeaveAsRealtimeNanoseconds) {
  World& w = *new World(64 << 20);  // the clock the injector would pick on this machine
  const int64_t before = RangeClock::RealtimeNs();
  const Domain* d = w.domains.Default();
  w.tracker.Push(d, "timed");
  w.tracker.Pop(d);
  w.exporter->Start();
  w.exporter->Stop();
  const int64_t after = RangeClock::RealtimeNs();
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  std::vector<fs_range_event> ranges;
  for (const CopiedBatch& batch : w.shared->batches) {
    ranges.insert(ranges.end(), batch.ranges.begin(), batch.ranges.end());
  }
  ASSERT_EQ(ranges.size(), 1u);
  // Conversion error is far below a millisecond; the margin only absorbs calibration jitter.
  constexpr int64_t kSlackNs = 1000000;
  EXPECT_GE(ranges[0].start_ns, before - kSlackNs);
  EXPECT_LE(ranges[0].start_ns, ranges[0].end_ns);
  EXPECT_LE(ranges[0].end_ns, after + kSlackNs);
}

TEST(ExporterTest, EveryRecordFollowsItsPathDefinition) {
  World& w = *new World(64 << 20);
  w.exporter->Start();
  const Domain* d = w.domains.Default();
  for (int i = 0; i < 2000; ++i) {
    w.tracker.Push(d, "m" + std::to_string(i % 300));
    w.tracker.Pop(d);
  }
  w.exporter->Stop();
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  std::set<uint64_t> defined;
  size_t ranges = 0;
  for (const CopiedBatch& batch : w.shared->batches) {
    defined.insert(batch.path_ids.begin(), batch.path_ids.end());
    for (const fs_range_event& r : batch.ranges) {
      EXPECT_TRUE(defined.count(r.path_id)) << "path " << r.path_id << " used before defined";
    }
    ranges += batch.ranges.size();
  }
  EXPECT_EQ(ranges, 2000u);
  EXPECT_EQ(defined.size(), 300u);
}

TEST(ExporterTest, BufferBoundLossesReachTheSink) {
  World& w = *new World(/*budget=*/sizeof(RangeChunk));  // one chunk of ranges
  const Domain* d = w.domains.Default();
  for (int i = 0; i < 5000; ++i) {
    w.tracker.Push(d, "r");
    w.tracker.Pop(d);
  }
  constexpr uint64_t kKept = RangeChunk::kCapacity;
  EXPECT_EQ(w.losses.Get(LossCause::kBufferFull), 5000u - kKept);
  w.exporter->Start();
  w.exporter->Stop();
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  size_t ranges = 0;
  for (const CopiedBatch& batch : w.shared->batches) ranges += batch.ranges.size();
  EXPECT_EQ(ranges, kKept);
  EXPECT_EQ(w.shared->batches.back().losses.at(1), 5000u - kKept);  // BUFFER_FULL
}

TEST(ExporterTest, ControlsAreAnswered) {
  World& w = *new World(64 << 20);
  {
    std::lock_guard<std::mutex> lock(w.shared->mutex);
    fs_control flush{};
    flush.id = 5;
    flush.kind = FS_CONTROL_FLUSH;
    fs_control window{};
    window.id = 6;
    window.kind = FS_CONTROL_COUNTER_WINDOW;
    w.shared->controls = {flush, window};
  }
  w.exporter->Start();
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(w.shared->mutex);
      if (w.shared->replies.size() == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  w.exporter->Stop();
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  ASSERT_EQ(w.shared->replies.size(), 2u);
  // No counter windows in this process (no source for them): refused, saying so.
  EXPECT_EQ(w.shared->replies[0], std::make_pair(uint64_t{6}, false));
  EXPECT_EQ(w.shared->reply_messages[0], "counter windows are not available in this process");
  EXPECT_EQ(w.shared->replies[1], std::make_pair(uint64_t{5}, true));
}

// Waits (bounded) until the sink got `n` replies.
void AwaitReplies(World& w, size_t n) {
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> lock(w.shared->mutex);
      if (w.shared->replies.size() >= n) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(ExporterTest, CounterWindowControlsGoToTheWindowsAndTheirAnswerIsTheReply) {
  struct Asked {
    uint32_t steps;
    std::string set;
    uint64_t id;
  };
  auto asked = std::make_shared<std::vector<Asked>>();
  // Stands in for the counter collector: accepts the first window, refuses the next.
  WindowRequests windows = [asked](uint32_t steps, std::string_view set, uint64_t id) {
    asked->push_back(Asked{steps, std::string(set), id});
    if (asked->size() == 1)
      return ControlAnswer{true, "counting the next 2 steps (full, 6 passes)"};
    return ControlAnswer{false, "a counter window is already waiting for the next step"};
  };
  World& w = *new World(64 << 20, true, windows);
  {
    std::lock_guard<std::mutex> lock(w.shared->mutex);
    fs_control first{};
    first.id = 21;
    first.kind = FS_CONTROL_COUNTER_WINDOW;
    first.steps = 2;
    // The transport copies the daemon's text into a fixed array; fill it to the last byte to
    // prove the exporter does not read past it.
    std::memset(first.metric_set, 'x', sizeof first.metric_set);
    std::memcpy(first.metric_set, "full", 5);
    fs_control second = first;
    second.id = 22;
    std::memset(second.metric_set, 'c', sizeof second.metric_set);
    w.shared->controls = {second, first};  // popped from the back: 21 first
  }
  w.exporter->Start();
  AwaitReplies(w, 2);
  w.exporter->Stop();
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  ASSERT_EQ(w.shared->replies.size(), 2u);
  EXPECT_EQ(w.shared->replies[0], std::make_pair(uint64_t{21}, true));
  EXPECT_EQ(w.shared->reply_messages[0], "counting the next 2 steps (full, 6 passes)");
  EXPECT_EQ(w.shared->replies[1], std::make_pair(uint64_t{22}, false));
  EXPECT_EQ(w.shared->reply_messages[1], "a counter window is already waiting for the next step");
  ASSERT_EQ(asked->size(), 2u);
  EXPECT_EQ((*asked)[0].steps, 2u);
  EXPECT_EQ((*asked)[0].set, "full");
  EXPECT_EQ((*asked)[0].id, 21u);
  EXPECT_EQ((*asked)[1].set, std::string(sizeof(fs_control::metric_set), 'c'));
}

TEST(ExporterTest, ASinkThatCannotOpenNeverBreaksRecording) {
  World& w = *new World(64 << 20, /*sink_opens=*/false);
  w.exporter->Start();
  const Domain* d = w.domains.Default();
  w.tracker.Push(d, "a");
  w.tracker.Pop(d);
  w.exporter->Stop();
  EXPECT_EQ(w.exporter->stats().undelivered, 1u);
  EXPECT_FALSE(w.exporter->stats().sink_open);
  std::lock_guard<std::mutex> lock(w.shared->mutex);
  EXPECT_TRUE(w.shared->batches.empty());
}

}  // namespace
}  // namespace flopscope::injector
