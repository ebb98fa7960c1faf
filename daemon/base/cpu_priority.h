#pragma once

#include <string>

#include "absl/status/status.h"

namespace flopscope::daemon {

// The daemon's CPU priority over the jobs it watches (flopscoped --nice, default kDefaultNice).
//
// Why: a node's training processes keep every core busy, and while 64 ranks start at once the
// run queue holds over a hundred threads (docs/reliability-rerun.md, row 4). At the default
// priority the daemon's threads then wait seconds for a core, so `report` took 5-8 s; a few
// nice levels above the job bring it under a second, and the daemon's own CPU (a few percent of
// a core) is too small for the job to notice.
//
// Two knobs, because the kernel weighs threads in two levels: the nice value of every thread
// (setpriority), and, where the kernel groups processes by session (autogroup, which applies to
// processes in the root CPU cgroup: a daemon started by hand, by a script or by Slurm's prolog),
// the nice value of the daemon's session, which weighs it against the job's session. Under
// systemd or Kubernetes the service's cgroup does the second: the unit sets Nice= and CPUWeight=
// (deploy/systemd/flopscoped.service), and the call below then finds the nice already set and
// makes no system call (that unit's seccomp filter forbids setpriority).

inline constexpr int kDefaultNice = -10;

// What RaiseCpuPriority did, for one log line.
struct CpuPriorityOutcome {
  int threads_nice = 0;      // the nice value the process runs at afterwards
  bool session_set = false;  // the session's (autogroup) nice was set to the same
  std::string note;          // why something was left as it was; empty when all was set
};

// The nice value of the daemon's background work: a stream's hello, batches and end (the
// Collector's ingest workers), the replays of orphaned spools and the disk budget's pruning.
// Queries keep the daemon's --nice.
//
// Why: inside the daemon every thread weighs the same, so while 64 ranks start and stream (row 4
// of docs/reliability-rerun.md) a report's reader threads shared the daemon's CPU with up to 64
// committing streams. At the jobs' own priority (0) ingest runs behind the queries, and beside
// the job where the kernel does not group the daemon apart (no autogroup, no cgroup of its own):
// its commits then take no more of a node than a process of the job would.
inline constexpr int kBackgroundNice = 0;

// Runs the calling thread at nice `nice` for the object's life, then back at the value it had.
// Only where that way back is allowed: lowering a nice value needs CAP_SYS_NICE or an
// RLIMIT_NICE that reaches it; without it nothing changes. (The way back was for gRPC's pool
// threads, which served a stream and then a query; its users now hold it for their thread's
// whole life: the Collector's ingest workers, the spool collector, the pruner.) Never raises the
// thread's priority (a `nice` below its value is left). Thread-compatible: each object is about the
// thread that constructs it, and must be destroyed on that thread.
class ScopedThreadNice {
 public:
  explicit ScopedThreadNice(int nice);
  ~ScopedThreadNice();
  ScopedThreadNice(const ScopedThreadNice&) = delete;
  ScopedThreadNice& operator=(const ScopedThreadNice&) = delete;

  bool applied() const { return applied_; }

 private:
  int before_ = 0;
  bool applied_ = false;
};

// Whether this process may set a thread's nice value down to `nice` (CAP_SYS_NICE in its
// effective set, or RLIMIT_NICE down to it).
bool MayLowerNiceTo(int nice);

// Runs the process at nice `nice` (-20..19): setpriority on the calling thread, which every
// thread started later inherits, and the autogroup nice of the session when this process leads
// it (never another process's session: a daemon started from a shell would raise the shell's).
// Lowering a nice value needs CAP_SYS_NICE (root, or the unit's Nice=); without it the process
// keeps its priority and `note` says so: that is no error, the daemon works as before.
// INVALID_ARGUMENT outside -20..19; FAILED_PRECONDITION when the process already has more than
// one thread (threads started before would keep the old priority).
// Thread-compatible: call it from main() before anything starts a thread.
absl::Status RaiseCpuPriority(int nice, CpuPriorityOutcome* outcome);

}  // namespace flopscope::daemon
