#include "injector/export/exporter.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>

#include "injector/warn.h"

namespace flopscope::injector {
namespace {

// How long Stop waits beyond the delivery timeout for the thread to wrap up (encoding, closing).
constexpr uint32_t kStopMarginMs = 2000;

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
      assembler_(options.max_batch_items, options.max_batch_bytes),
      exit_timeout_ms_(options.exit_timeout_ms) {}

Exporter::~Exporter() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void Exporter::Start() {
  MutexLock lock(&mutex_);
  if (started_) return;
  thread_ = std::thread([this] { Run(); });  // may throw; then Stop has nothing to wait for
  started_ = true;
}

void Exporter::Wake() {
  // No lock: this runs on application threads. A wake-up that races with the exporter going to
  // sleep is only late by one flush interval.
  early_.store(true, std::memory_order_relaxed);
  wake_.Signal();
}

bool Exporter::Stop() {
  MutexLock lock(&mutex_);
  if (!started_) return false;
  if (finished_) return true;
  stop_requested_ = true;
  wake_.Signal();
  // Bounded: the job's exit must never hang on us. If the thread overruns, the process exits
  // around it.
  const uint32_t timeout_ms = exit_timeout_ms_.load(std::memory_order_relaxed);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms + kStopMarginMs);
  while (!finished_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    done_.WaitFor(&mutex_, deadline - now);
  }
  return finished_;
}

void Exporter::LimitExitTimeout(uint32_t ms) {
  uint32_t current = exit_timeout_ms_.load(std::memory_order_relaxed);
  while (ms < current && !exit_timeout_ms_.compare_exchange_weak(current, ms)) {
  }
}

Exporter::Stats Exporter::stats() {
  MutexLock lock(&mutex_);
  return stats_;
}

void Exporter::Run() {
  // Named so that it is recognisable in top, perf and debuggers of the job.
  pthread_setname_np(pthread_self(), "flopscope-exp");
  std::string error;
  sink_open_ = sink_->Open(&error);
  if (!sink_open_) Warn(error);
  mutex_.Lock();
  stats_.sink_open = sink_open_;
  while (!stop_requested_) {
    WaitForWorkLocked();
    if (stop_requested_) break;
    wake_requested_ = false;
    early_.store(false, std::memory_order_relaxed);
    // Unlocked for the cycle: it calls the sink, and application threads only ever Wake().
    mutex_.Unlock();
    ExportCycle(/*final=*/false);
    HandleControls();
    mutex_.Lock();
  }
  mutex_.Unlock();
  ExportCycle(/*final=*/true);
  FinishSink();
}

void Exporter::WaitForWorkLocked() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.flush_ms);
  while (!stop_requested_ && !wake_requested_ && !early_.load(std::memory_order_relaxed)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    wake_.WaitFor(&mutex_, deadline - now);
  }
}

void Exporter::ExportCycle(bool final) {
  if (sources_.before_drain) sources_.before_drain(final);
  ExportContent content;
  // Records first, definitions second: a record drained now had its path interned before it was
  // appended, so its definition is already queued and goes in this cycle or went earlier.
  sources_.buffers->DrainAll(&content.records);
  ConvertTimestamps(&content.records);
  // Before the definitions are taken: every path an open range names was interned before the
  // range was published, so its definition goes in this cycle or went earlier.
  content.open_ranges = TakeOpenRanges(final);
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
  const bool send_open = content.open_ranges.has_value();

  if (!sink_open_) {
    undelivered_while_closed_ += content.records.size();
    return;
  }
  assembler_.Reset(std::move(content), /*send_empty=*/final || losses_changed || send_open);
  fs_batch batch;
  uint64_t records = 0;
  uint64_t batches = 0, sent = 0;
  while (assembler_.Next(&batch, &records)) {
    sink_->Submit(batch, records);
    ++batches;
    sent += records;
  }
  MutexLock lock(&mutex_);
  stats_.batches += batches;
  stats_.records += sent;
}

std::optional<OpenRangesContent> Exporter::TakeOpenRanges(bool final) {
  if (!sources_.read_open_stacks) return std::nullopt;
  OpenRangesContent content;
  content.time_ns = RangeClock::RealtimeNs();
  // The last batch says nothing is open: the process is leaving (a range left open is counted
  // as UNCLOSED_RANGE in the same batch).
  if (final) return content;
  if (options_.open_ranges_interval_ms == 0) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_open_read_ < std::chrono::milliseconds(options_.open_ranges_interval_ms)) {
    return std::nullopt;
  }
  last_open_read_ = now;
  std::vector<ThreadOpenStacks> stacks;
  sources_.read_open_stacks(&stacks);
  if (stacks.size() > kMaxOpenRangeThreads) {
    // Those open the longest: the oldest outermost range first (a hang is the oldest range).
    auto oldest = [](const ThreadOpenStacks& t) {
      int64_t start = INT64_MAX;
      if (!t.modules.empty()) start = std::min(start, t.modules.front().start_ns);
      if (!t.phases.empty()) start = std::min(start, t.phases.front().start_ns);
      return start;
    };
    std::sort(stacks.begin(), stacks.end(),
              [&](const ThreadOpenStacks& a, const ThreadOpenStacks& b) {
                return oldest(a) < oldest(b);
              });
    stacks.resize(kMaxOpenRangeThreads);
  }
  std::sort(stacks.begin(), stacks.end(), [](const ThreadOpenStacks& a, const ThreadOpenStacks& b) {
    return a.thread_id < b.thread_id;
  });
  if (stacks == last_sent_open_) return std::nullopt;
  last_sent_open_ = stacks;
  RangeClock* clock = sources_.clock;
  const bool convert = clock != nullptr && clock->source() != RangeClock::Source::kRealtime;
  for (ThreadOpenStacks& thread : stacks) {
    for (std::vector<OpenRangeEntry>* entries : {&thread.modules, &thread.phases}) {
      for (OpenRangeEntry& entry : *entries) {
        if (convert) entry.start_ns = clock->ToRealtimeNs(static_cast<uint64_t>(entry.start_ns));
        // A range pushed a moment after the read of `now` began (the clocks differ by a
        // conversion's rounding too) is not older than the snapshot.
        entry.start_ns = std::min(entry.start_ns, content.time_ns);
      }
    }
  }
  content.threads = std::move(stacks);
  return content;
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
    if (control.kind == FS_CONTROL_FLUSH) {  // the next cycle starts at once
      {
        MutexLock lock(&mutex_);
        wake_requested_ = true;
      }
      sink_->ReplyControl(control.id, true, "flushing");
    } else if (control.kind == FS_CONTROL_COUNTER_WINDOW) {
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
    outcome = sink_->Finish(exit_timeout_ms_.load(std::memory_order_relaxed));
  } else if (undelivered_while_closed_ > 0) {
    outcome.undelivered_records = undelivered_while_closed_;
    outcome.reason = "the transport could not be opened";
  }
  // Records dropped in the job before any batch held them: never stored either (their counts
  // are, when a batch reaches the daemon). Together with the sink's figure: what the store lacks.
  const LossCounters& losses = *sources_.losses;
  const uint64_t in_job =
      losses.Get(LossCause::kBufferFull) + losses.Get(LossCause::kStackOverflow) +
      losses.Get(LossCause::kTooManyPaths) + losses.Get(LossCause::kCuptiDropped);
  if (outcome.undelivered_records + in_job > 0) {
    std::string why =
        in_job > 0 ? std::to_string(in_job) + " dropped in the job (buffer full or over a limit)"
                   : std::string();
    if (outcome.undelivered_records > 0) {
      why += (why.empty() ? "" : ", ") + outcome.reason;
    }
    Warn(std::to_string(outcome.undelivered_records + in_job) + " records not delivered to " +
         sink_->Destination() + ": " + why);
  }
  if (!outcome.stored_as_job_id.empty()) {
    Warn(
        "this job's id belongs to another user on the daemon, so this run was kept apart: its "
        "records are job " +
        outcome.stored_as_job_id + " (flopscope report " + outcome.stored_as_job_id + ")");
  }
  if (outcome.spooled_records > 0) {
    Warn(std::to_string(outcome.spooled_records) + " records spooled to " + outcome.spool_path +
         ": they go only to the daemon at " + sink_->Destination() +
         ", which delivers them (or the next flopscope process of this user aimed at it; all "
         "the records not acknowledged at exit: any the daemon had stored already are skipped "
         "then, so the store may lack fewer)");
  }
  MutexLock lock(&mutex_);
  stats_.undelivered = outcome.undelivered_records;
  finished_ = true;
  done_.SignalAll();
}

}  // namespace flopscope::injector
