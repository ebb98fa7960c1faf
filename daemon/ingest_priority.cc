#include "daemon/ingest_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "daemon/logger.h"

namespace flopscope::daemon {
namespace {

int ThisThreadId() { return static_cast<int>(syscall(SYS_gettid)); }

// The thread's nice value, or false (getpriority returns -1 for nice -1 too: errno tells).
bool NiceOf(int tid, int* nice) {
  errno = 0;
  const int value = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (value == -1 && errno != 0) return false;
  *nice = value;
  return true;
}

bool SetNice(int tid, int nice) {
  return setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0;
}

// Lowers and restores a throw-away thread's priority: what every stream would do.
bool Probe() {
  bool works = false;
  std::thread probe([&works] {
    const int tid = ThisThreadId();
    int before = 0;
    works = NiceOf(tid, &before) && SetNice(tid, before + kIngestNice) && SetNice(tid, before);
  });
  probe.join();
  return works;
}

}  // namespace

bool IngestPriorityWorks() {
  static const bool works = [] {
    const bool result = Probe();
    if (!result) {
      LogInfo(
          "streams run at the queries' priority: this process may not put a thread's nice "
          "value back (needs CAP_SYS_NICE or RLIMIT_NICE)");
    }
    return result;
  }();
  return works;
}

ScopedIngestPriority::ScopedIngestPriority() {
  if (!IngestPriorityWorks()) return;
  tid_ = ThisThreadId();
  if (!NiceOf(tid_, &nice_before_)) return;
  lowered_ = SetNice(tid_, nice_before_ + kIngestNice);
}

ScopedIngestPriority::~ScopedIngestPriority() {
  if (!lowered_) return;
  // Thread-affinity: gRPC runs a handler on one thread from start to end, so this is the
  // thread lowered above (checked: a restore on another thread would change the wrong one).
  if (ThisThreadId() != tid_ || !SetNice(tid_, nice_before_)) {
    LogWarning("could not put stream thread ", tid_, "'s priority back to nice ", nice_before_);
  }
}

}  // namespace flopscope::daemon
