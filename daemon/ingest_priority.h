#pragma once

// Streams of records run at a lower CPU priority than the daemon's queries (issue 15: `ranks`
// and `report` answer while 64 ranks stream into the same daemon on two cores).
//
// All of the daemon's RPCs share gRPC's thread pool, so the priority is per stream: a Collector
// stream's handler raises its thread's nice value by kIngestNice for the stream's life and puts
// it back after, before gRPC hands the thread a query. Linux applies setpriority(PRIO_PROCESS)
// to a thread id alone. Putting a nice value back down needs CAP_SYS_NICE or RLIMIT_NICE (a
// daemon started by systemd as root has both); where the process may not, a thread once lowered
// would stay lowered and serve queries that way, so nothing is changed at all
// (IngestPriorityWorks, probed once on a thread of its own).
//
// What it buys: within the daemon, a query's threads get about three times the CPU share of
// each stream's (CFS weights 1024 and 335) while both want it; with no query running, the
// streams have the CPU as before.

namespace flopscope::daemon {

// How much nicer a stream's thread runs than the daemon's other threads.
inline constexpr int kIngestNice = 5;

// Whether this process may lower a thread's priority and put it back (probed once).
bool IngestPriorityWorks();

// Lowers the calling thread's priority by kIngestNice for its scope, where IngestPriorityWorks.
// Thread-affine: must be destroyed on the thread that made it.
class ScopedIngestPriority {
 public:
  ScopedIngestPriority();
  ~ScopedIngestPriority();
  ScopedIngestPriority(const ScopedIngestPriority&) = delete;
  ScopedIngestPriority& operator=(const ScopedIngestPriority&) = delete;

  bool lowered() const { return lowered_; }

 private:
  bool lowered_ = false;
  int tid_ = 0;
  int nice_before_ = 0;
};

}  // namespace flopscope::daemon
