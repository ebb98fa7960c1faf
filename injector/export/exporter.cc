#include "injector/export/exporter.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace flopscope::injector {
namespace {

// How long Stop waits beyond the delivery timeout for the thread to wrap up (encoding, closing).
constexpr uint32_t kStopMarginMs = 2000;

// fs_control::kind
constexpr uint32_t kCounterWindowControl = 1;
constexpr uint32_t kFlushControl = 2;

bool SameLosses(const std::vector<fs_loss>& a, const std::vector<fs_loss>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].cause != b[i].cause || a[i].records != b[i].records) return false;
  }
  return true;
}

}  // namespace

Exporter::Exporter(Options options, Sources sources, std::unique_ptr<BatchSink> sink)
    : options_(options),
      sources_(std::move(sources)),
      sink_(std::move(sink)),
      assembler_(options.max_batch_items, options.max_batch_bytes) {}

Exporter::~Exporter() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void Exporter::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_) return;
  thread_ = std::thread([this] { Run(); });  // may throw; then Stop has nothing to wait for
  started_ = true;
}

void Exporter::Wake() {
  // No lock: this runs on application threads. A wake-up that races with the exporter going to
  // sleep is only late by one flush interval.
  early_.store(true, std::memory_order_relaxed);
  wake_.notify_one();
}

void Exporter::Stop() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!started_ || finished_) return;
  stop_requested_ = true;
  wake_.notify_one();
  // Bounded: the job's exit must never hang on us. If the thread overruns, the process exits
  // around it.
  const auto limit = std::chrono::milliseconds(options_.exit_timeout_ms + kStopMarginMs);
  done_.wait_for(lock, limit, [this] { return finished_; });
}

Exporter::Stats Exporter::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Exporter::Run() {
  // Named so that it is recognisable in top, perf and debuggers of the job.
  pthread_setname_np(pthread_self(), "flopscope-exp");
  std::string error;
  sink_open_ = sink_->Open(&error);
  if (!sink_open_) std::fprintf(stderr, "flopscope: %s\n", error.c_str());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.sink_open = sink_open_;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_requested_) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.flush_ms), [this] {
      return stop_requested_ || wake_requested_ || early_.load(std::memory_order_relaxed);
    });
    if (stop_requested_) break;
    wake_requested_ = false;
    early_.store(false, std::memory_order_relaxed);
    lock.unlock();
    ExportCycle(/*final=*/false);
    HandleControls();
    lock.lock();
  }
  lock.unlock();
  ExportCycle(/*final=*/true);
  FinishSink();
}

void Exporter::ExportCycle(bool final) {
  if (sources_.before_drain) sources_.before_drain(final);
  ExportContent content;
  // Records first, definitions second: a record drained now had its path interned before it was
  // appended, so its definition is already queued and goes in this cycle or went earlier.
  sources_.buffers->DrainAll(&content.records);
  ConvertTimestamps(&content.records);
  sources_.strings->TakeNewDefinitions(&content.strings);
  sources_.paths->TakeNewDefinitions(&content.paths);
  if (final && sources_.count_open_ranges) {
    if (const uint64_t open = sources_.count_open_ranges()) {
      sources_.losses->Add(LossCause::kUnclosedRange, open);
    }
  }
  content.losses = sources_.losses->Snapshot();
  content.final = final;
  const bool losses_changed = !SameLosses(content.losses, last_sent_losses_);
  last_sent_losses_ = content.losses;

  if (!sink_open_) {
    undelivered_while_closed_ += content.records.size();
    return;
  }
  assembler_.Reset(std::move(content), /*send_empty=*/final || losses_changed);
  fs_batch batch;
  uint64_t records = 0;
  uint64_t batches = 0, sent = 0;
  while (assembler_.Next(&batch, &records)) {
    sink_->Submit(batch, records);
    ++batches;
    sent += records;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.batches += batches;
  stats_.records += sent;
}

void Exporter::ConvertTimestamps(RecordSet* records) {
  RangeClock* clock = sources_.clock;
  if (clock == nullptr || clock->source() == RangeClock::Source::kRealtime) return;
  clock->Calibrate();
  for (fs_range_event& range : records->ranges) {
    range.start_ns = clock->ToRealtimeNs(static_cast<uint64_t>(range.start_ns));
    range.end_ns = clock->ToRealtimeNs(static_cast<uint64_t>(range.end_ns));
  }
  for (MetadataRecord& metadata : records->metadata) {
    metadata.time_ns = clock->ToRealtimeNs(static_cast<uint64_t>(metadata.time_ns));
  }
  // Kernel records carry GPU timestamps already in ns (kernel_api.h): not converted.
}

void Exporter::HandleControls() {
  if (!sink_open_) return;
  fs_control control;
  while (sink_->PollControl(&control)) {
    if (control.kind == kFlushControl) {  // the next cycle starts at once
      {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_requested_ = true;
      }
      sink_->ReplyControl(control.id, true, "flushing");
    } else if (control.kind == kCounterWindowControl) {
      const ControlAnswer answer = AnswerCounterWindow(control);
      sink_->ReplyControl(control.id, answer.accepted, answer.message);
    } else {
      sink_->ReplyControl(control.id, false,
                          "unknown control kind " + std::to_string(control.kind));
    }
  }
}

ControlAnswer Exporter::AnswerCounterWindow(const fs_control& control) {
  if (!sources_.request_counter_window) {
    return ControlAnswer{false, "counter windows are not available in this process"};
  }
  // The transport fills the fixed array from the daemon's string: not necessarily terminated.
  const std::string_view metric_set(control.metric_set,
                                    strnlen(control.metric_set, sizeof control.metric_set));
  return sources_.request_counter_window(control.steps, metric_set, control.id);
}

void Exporter::FinishSink() {
  DeliveryOutcome outcome;
  if (sink_open_) {
    outcome = sink_->Finish(options_.exit_timeout_ms);
  } else if (undelivered_while_closed_ > 0) {
    outcome.undelivered_records = undelivered_while_closed_;
    outcome.reason = "the transport could not be opened";
  }
  if (outcome.undelivered_records > 0) {
    std::fprintf(stderr, "flopscope: %llu records not delivered to %s: %s\n",
                 static_cast<unsigned long long>(outcome.undelivered_records),
                 sink_->Destination().c_str(), outcome.reason.c_str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.undelivered = outcome.undelivered_records;
  finished_ = true;
  done_.notify_all();
}

}  // namespace flopscope::injector
