#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "injector/export/batch_assembler.h"
#include "injector/export/batch_sink.h"
#include "injector/ranges/counter_windows.h"
#include "injector/records/loss_counters.h"
#include "injector/ranges/path_table.h"
#include "injector/ranges/range_clock.h"
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
  };
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

  void Start();
  // Asks for an early drain; callable from any thread, cheap, never blocks.
  void Wake();
  // Sends the final batch, waits for delivery (bounded by exit_timeout_ms plus a margin for the
  // thread itself) and prints one stderr line if records stay undelivered. Idempotent.
  void Stop();

  Stats stats();

 private:
  void Run();
  void ExportCycle(bool final);
  void ConvertTimestamps(RecordSet* records);
  void HandleControls();
  ControlAnswer AnswerCounterWindow(const fs_control& control);
  void FinishSink();

  const Options options_;
  const Sources sources_;
  std::unique_ptr<BatchSink> sink_;
  BatchAssembler assembler_;
  std::thread thread_;
  std::vector<fs_loss> last_sent_losses_;  // exporter thread only
  bool sink_open_ = false;                 // exporter thread only
  uint64_t undelivered_while_closed_ = 0;  // exporter thread only: drained with no sink

  // Guards the flags below and stats_; the exporter waits on wake_ with it between cycles.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_requested_ = false;
  bool wake_requested_ = false;
  bool finished_ = false;
  bool started_ = false;
  Stats stats_;
  // Set from application threads without the mutex (Wake must never block a hot path).
  std::atomic<bool> early_{false};
};

}  // namespace flopscope::injector
