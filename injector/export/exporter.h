#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "injector/export/batch_assembler.h"
#include "injector/export/batch_sink.h"
#include "injector/ranges/counter_windows.h"
#include "injector/ranges/path_table.h"
#include "injector/ranges/range_clock.h"
#include "injector/records/loss_counters.h"
#include "injector/records/string_table.h"
#include "injector/records/thread_buffer.h"

namespace flopscope::injector {

// The session's one background thread: every flush interval (or when a buffer fills up) it
// drains the thread buffers, takes the new definitions, and submits bounded batches to its sink.
// At exit it sends the final batch and waits, bounded, for delivery. The sink is opened and used
// on this thread only (see transport_abi.h: the transport's libc state is per thread).
class Exporter {
 public:
  struct Options {
    uint32_t flush_ms = 100;
    uint32_t exit_timeout_ms = 5000;
    size_t max_batch_items = BatchAssembler::kDefaultMaxItems;
    size_t max_batch_bytes = BatchAssembler::kDefaultMaxBytes;
    // How often at most the open ranges are read and, when they changed, sent (`flopscope
    // where`); 0: never.
    uint32_t open_ranges_interval_ms = 1000;
  };
  // Threads reported in one snapshot of the open ranges at most: those open the longest.
  static constexpr size_t kMaxOpenRangeThreads = 256;
  struct Sources {
    PathTable* paths;
    StringTable* strings;
    BufferRegistry* buffers;
    LossCounters* losses;
    // Converts the records' raw timestamps; null when they are CLOCK_REALTIME ns already.
    RangeClock* clock;
    // Ranges still open at exit (counted as UNCLOSED_RANGE in the final batch).
    std::function<uint64_t()> count_open_ranges;
    // Runs on the exporter thread at the start of every cycle, before the buffers are drained
    // (`true` for the final one at exit): kernel tracing flushes CUPTI and hands over its
    // records here. Called with no exporter lock held. May be empty.
    std::function<void(bool final)> before_drain = nullptr;
    // Answers the daemon's counter-window controls (steps, metric set, control id); runs on the
    // exporter thread between cycles. Empty: every such control is refused.
    std::function<ControlAnswer(uint32_t, std::string_view, uint64_t)> request_counter_window =
        nullptr;
    // The push/pop ranges open on the process's threads, start times raw clock readings
    // (RangeTracker::ReadOpenStacks). Empty: no snapshots are sent.
    std::function<void(std::vector<ThreadOpenStacks>*)> read_open_stacks = nullptr;
  };
  struct Stats {
    uint64_t batches = 0;
    uint64_t records = 0;
    uint64_t undelivered = 0;  // known after Stop
    bool sink_open = false;
  };

  Exporter(Options options, Sources sources, std::unique_ptr<BatchSink> sink);
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;
  // Never destroyed while its thread runs: the injector's exporter lives as long as the process.
  ~Exporter();

  void Start() FS_EXCLUDES(mutex_);
  // Asks for an early drain; callable from any thread, cheap, never blocks.
  void Wake();
  // Sends the final batch, waits for delivery (bounded by exit_timeout_ms plus a margin for the
  // thread itself) and prints one stderr line if records stay undelivered. Idempotent. True
  // when the thread finished (final batch submitted, delivery settled); false when it overran
  // the bound or never started.
  bool Stop() FS_EXCLUDES(mutex_);
  // Cuts the wait for acknowledgements at exit to at most `ms` (SIGTERM's drain: the process
  // must die in time). Callable from any thread; a wait already begun keeps its length.
  void LimitExitTimeout(uint32_t ms);

  Stats stats() FS_EXCLUDES(mutex_);

 private:
  void Run() FS_EXCLUDES(mutex_);
  // Waits (at most flush_ms) until a stop, a flush control or an early wake asks for a cycle.
  void WaitForWorkLocked() FS_REQUIRES(mutex_);
  // Both call out to the sink (the transport, which may block): never under mutex_.
  void ExportCycle(bool final) FS_EXCLUDES(mutex_);
  void ConvertTimestamps(RecordSet* records);
  // The open ranges to send this cycle, if any: at most once an interval and only when they
  // changed since the last ones sent; at exit always, with nothing open.
  std::optional<OpenRangesContent> TakeOpenRanges(bool final);
  void HandleControls() FS_EXCLUDES(mutex_);
  ControlAnswer AnswerCounterWindow(const fs_control& control);
  void FinishSink() FS_EXCLUDES(mutex_);

  const Options options_;
  const Sources sources_;
  std::unique_ptr<BatchSink> sink_;
  BatchAssembler assembler_;
  std::thread thread_;
  std::vector<fs_loss> last_sent_losses_;  // exporter thread only
  // Exporter thread only: the open stacks last sent (raw timestamps) and when they were read.
  std::vector<ThreadOpenStacks> last_sent_open_;
  std::chrono::steady_clock::time_point last_open_read_{};
  bool sink_open_ = false;                 // exporter thread only
  uint64_t undelivered_while_closed_ = 0;  // exporter thread only: drained with no sink

  // Guards the flags below and stats_; the exporter waits on wake_ with it between cycles.
  Mutex mutex_;
  CondVar wake_;
  CondVar done_;
  bool stop_requested_ FS_GUARDED_BY(mutex_) = false;
  bool wake_requested_ FS_GUARDED_BY(mutex_) = false;
  bool finished_ FS_GUARDED_BY(mutex_) = false;
  bool started_ FS_GUARDED_BY(mutex_) = false;
  Stats stats_ FS_GUARDED_BY(mutex_);
  // Set from application threads without the mutex (Wake must never block a hot path).
  std::atomic<bool> early_{false};
  // options_.exit_timeout_ms, or less after LimitExitTimeout.
  std::atomic<uint32_t> exit_timeout_ms_;
};

}  // namespace flopscope::injector
