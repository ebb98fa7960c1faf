#pragma once

// The threads that do the Collector's blocking work (docs/design/daemon.md, "Ingest"): a stream's
// admission, its hello (the job claim, the rank file's open), each batch's commit (a SQLite
// transaction, slow on a slow disk) and its end. The Collector's streams are served by gRPC's
// callback API (collector_service.h), whose reactions run on a few gRPC event threads that every
// stream shares; a reaction that blocked there would stall the reads of every other stream, so
// it posts the work here and returns.
//
// A fixed number of threads, started with the pool, take tasks in the order they were posted.
// The pool is bounded in threads, not in tasks: each stream has at most one task queued or
// running (it reads its next message only when its task is done), so the queue holds at most one
// task per live stream.
//
// Thread-safe. Hazard: a task runs on a worker thread at the background nice value
// (cpu_priority.h, kBackgroundNice) and may block on the disk and on the stores' and catalog's
// locks; it must never wait for another task of this pool (with every worker waiting, nothing
// would run).

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace flopscope::daemon {

// The workers' thread name (at most 15 characters), as /proc/PID/task/TID/comm shows it.
inline constexpr char kIngestThreadName[] = "flopscoped-ing";

class IngestWorkers {
 public:
  // Starts `threads` workers (at least one).
  explicit IngestWorkers(int threads);
  // Runs what was posted, then stops and joins the workers.
  ~IngestWorkers();
  IngestWorkers(const IngestWorkers&) = delete;
  IngestWorkers& operator=(const IngestWorkers&) = delete;

  // Queues `task`; a free worker runs it. Never blocks beyond the queue's lock.
  void Post(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  int threads() const { return static_cast<int>(threads_.size()); }
  // Tasks posted and not yet started (for tests and metrics).
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  // Guards only the queue: held to push or pop a task, never while one runs.
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// How many workers a daemon's Collector gets: two per core, at least 4 and at most 16. Commits
// of different ranks go to different files and run side by side; more threads than that only
// queue on the disk.
int DefaultIngestWorkers();

}  // namespace flopscope::daemon
