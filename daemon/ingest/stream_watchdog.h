#pragma once

// Ends Collector streams that hold a peer's slot and say nothing (docs/design/access.md,
// "Bounded per peer"; reliability campaign row 5a′). A stream holds no thread while it waits
// (collector_service.h: callback API), but it holds one of its peer's stream slots, its reactor
// and its buffers; a peer that opens streams and never sends a hello would hold those for ever.
// A stream must send its hello within `hello_timeout` and then some message at least every
// `idle_timeout`; past either the watchdog cancels the call (the pending read fails, the stream
// ends and lets go of its slot). A producer that is only quiet reconnects and resumes with its
// token, losing nothing.
//
// Thread-safe. Hazard: the watchdog calls ServerContextBase::TryCancel from its own thread, which
// gRPC allows; it does so under mu_, and a Watch is removed under mu_ before its stream calls
// Finish (gRPC frees the context only after that), so the context is alive whenever it is
// cancelled.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace flopscope::daemon {

class StreamWatchdog {
 public:
  StreamWatchdog(absl::Duration hello_timeout, absl::Duration idle_timeout);
  ~StreamWatchdog();  // stops the thread

  // One stream under watch, from its start until destroyed (before the stream's Finish).
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    // A message arrived: the hello (the first), or any later one. Moves the deadline on.
    void Heard();

   private:
    friend class StreamWatchdog;
    Watch(StreamWatchdog* watchdog, uint64_t id) : watchdog_(watchdog), id_(id) {}
    StreamWatchdog* const watchdog_;
    const uint64_t id_;
  };

  // Watches the stream of `context` from now: cancelled unless a hello arrives in time.
  std::unique_ptr<Watch> Start(grpc::ServerContextBase* context) ABSL_LOCKS_EXCLUDED(mu_);

  // Streams cancelled for silence so far.
  uint64_t cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    grpc::ServerContextBase* context;
    absl::Time deadline;
    bool heard = false;  // the hello came
  };
  void Heard(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels every stream past its deadline.
  void CancelOverdue(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration hello_timeout_;
  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace flopscope::daemon
