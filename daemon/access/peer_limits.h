#pragma once

// How much one peer may hold of the daemon (docs/design/access.md, "Bounded per peer"): the
// Collector streams open at once, per uid and in all, the queries in flight per uid, and the new
// jobs a uid may create per minute. The access policy says who may touch which job; this says how
// much of the shared daemon anyone may take, so that one user's stalled streams or flood of job ids
// never starve another user's ingest or queries (reliability campaign rows 5a′ and 4j).
//
// A stream holds a slot for its whole life: taken before the hello is read, given back when the
// handler returns; a query holds one while its handler runs, so that one user's reports cannot
// take the threads kept for everyone's queries. Streams forwarded by a node daemon count against
// the total only: the node carries many users' sessions, and its own daemon applied the per-uid
// limits where they began.
//
// Thread-safe: one mutex guards the counts; it is held only to count, never across I/O.

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/access/peer_identity.h"

namespace flopscope::daemon {

struct PeerLimitOptions {
  int max_streams = 960;              // open Collector streams in all (--max-streams)
  int max_streams_per_uid = 256;      // --max-streams-per-uid
  int max_new_jobs_per_minute = 120;  // --max-new-jobs-per-minute, per uid (0: no limit)
  int max_queries_per_uid = 32;       // --max-queries-per-uid: queries in flight at once
};

class PeerLimits {
 public:
  explicit PeerLimits(PeerLimitOptions options) : options_(options) {}

  // A stream's or a query's place; gives it back when destroyed.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    friend class PeerLimits;
    enum class Kind { kStream, kQuery };
    Slot(PeerLimits* limits, Kind kind, bool per_uid, uid_t uid)
        : limits_(limits), kind_(kind), per_uid_(per_uid), uid_(uid) {}
    PeerLimits* const limits_;
    const Kind kind_;
    const bool per_uid_;
    const uid_t uid_;
  };

  // A slot for a stream of `caller` (the connection's identity, before any forwarding), or
  // RESOURCE_EXHAUSTED naming the limit reached. A node daemon's streams count in the total only.
  absl::StatusOr<std::unique_ptr<Slot>> AdmitStream(const PeerIdentity& caller)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A slot for a query of `caller`, or RESOURCE_EXHAUSTED when that uid has max_queries_per_uid
  // in flight. Root is not limited (an operator's tools must get through).
  absl::StatusOr<std::unique_ptr<Slot>> AdmitQuery(const PeerIdentity& caller)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Before `uid` creates a job at `now`: OK while it created fewer than the limit in the minute
  // before, else RESOURCE_EXHAUSTED. Counts the job when OK. Root is not limited.
  absl::Status AdmitNewJob(uid_t uid, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  int streams() const ABSL_LOCKS_EXCLUDED(mu_);
  const PeerLimitOptions& options() const { return options_; }

 private:
  void Release(const Slot& slot) ABSL_LOCKS_EXCLUDED(mu_);

  // One uid's new jobs: a window of one minute that restarts when it has passed.
  struct JobWindow {
    absl::Time start;
    int created = 0;
  };

  const PeerLimitOptions options_;
  mutable absl::Mutex mu_;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uid_t, int> streams_by_uid_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, int> queries_by_uid_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, JobWindow> new_jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flopscope::daemon
