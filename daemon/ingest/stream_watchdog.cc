// Cancels Collector streams that stay silent past their deadline (stream_watchdog.h).
#include "daemon/ingest/stream_watchdog.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "daemon/base/logger.h"

namespace flopscope::daemon {
namespace {

// How often the deadlines are looked at: a stream is ended at most this late.
constexpr absl::Duration kTick = absl::Milliseconds(250);

}  // namespace

StreamWatchdog::StreamWatchdog(absl::Duration hello_timeout, absl::Duration idle_timeout)
    : hello_timeout_(hello_timeout), idle_timeout_(idle_timeout), thread_([this] { Run(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

StreamWatchdog::Watch::~Watch() { watchdog_->Forget(id_); }

void StreamWatchdog::Watch::Heard() { watchdog_->Heard(id_); }

std::unique_ptr<StreamWatchdog::Watch> StreamWatchdog::Start(grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_[id] = Entry{context, absl::Now() + hello_timeout_};
  return std::unique_ptr<Watch>(new Watch(this, id));
}

uint64_t StreamWatchdog::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void StreamWatchdog::Heard(uint64_t id) {
  const absl::Time deadline = absl::Now() + idle_timeout_;
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.deadline = deadline;
  it->second.heard = true;
}

void StreamWatchdog::Forget(uint64_t id) {
  absl::MutexLock lock(&mu_);
  entries_.erase(id);
}

void StreamWatchdog::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kTick);
    CancelOverdue(absl::Now());
  }
}

void StreamWatchdog::CancelOverdue(absl::Time now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    LogInfo("ended a collector stream from ", it->second.context->peer(), ": ",
            it->second.heard ? "nothing heard for " : "no hello within ",
            absl::FormatDuration(it->second.heard ? idle_timeout_ : hello_timeout_));
    it->second.context->TryCancel();
    ++cancelled_;
    entries_.erase(it++);
  }
}

}  // namespace flopscope::daemon
