// The Collector's worker threads (ingest_workers.h).
#include "daemon/ingest/ingest_workers.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "daemon/base/cpu_priority.h"

namespace flopscope::daemon {

IngestWorkers::IngestWorkers(int threads) {
  const int count = std::max(1, threads);
  threads_.reserve(count);
  for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Run(); });
}

IngestWorkers::~IngestWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void IngestWorkers::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

size_t IngestWorkers::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void IngestWorkers::Run() {
  // How tests and `top -H` tell the workers from gRPC's threads (kIngestThreadName).
  pthread_setname_np(pthread_self(), kIngestThreadName);
  // Commits run behind the queries for the thread's whole life (cpu_priority.h).
  const ScopedThreadNice behind_queries(kBackgroundNice);
  while (true) {
    std::function<void()> task;
    {
      // Hazard: held only to take a task; the task runs after the lock is let go.
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      // Stopping drains the queue first: a posted task always runs.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

int DefaultIngestWorkers() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(2 * cores, 4, 16);
}

}  // namespace flopscope::daemon
