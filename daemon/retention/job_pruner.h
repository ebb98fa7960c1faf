#pragma once

// Deletes whole jobs from the data directory: `flopscope prune` (Query.PruneJobs) and the disk
// budget (`flopscoped --max-disk`, `--max-disk-per-user`: a periodic pass that deletes the jobs
// PlanPrune chooses by each user's share, and refuses the users it names, disk_budget.h). A
// running job is never deleted.
//
// One prune, in this order, so that a crash at any step leaves a state the next start finishes
// (RecoverInterrupted, run before the daemon serves):
//   1. the fence (StoreRegistry::BeginPrune): refused while a store of the job is open (or being
//      opened) or the catalog counts a connected stream; from here no stream can open the job
//      until step 5.
//   2. jobs/<job> renamed to jobs/.pruning-<job>, the directory synced: the durable intent. Job
//      ids never start with '.', so the name is no job's, and RelistRankFiles skips it.
//   3. the job's catalog rows deleted, in one transaction (Catalog::DeleteJob).
//   4. idle read connections to its files closed (an open one would keep the space).
//   5. the tombstone removed; the fence lifted.
// Files first (by the rename), catalog after: a crash after 2 leaves a tombstone that names its
// job, so the next start deletes that job's rows (idempotent) and the files. The other order
// would leave, after a crash between the steps, a job directory without catalog rows: neither
// listed nor counted, and indistinguishable from a directory a stream has just created.
//
// Threads and locks: a pass runs on the pruner's own thread (Start); Query.PruneJobs calls
// Prune on a gRPC thread; both may run at once, and the fence keeps two prunes of one job
// apart (the second is refused). The pruner's own mutex guards only its stop flag and
// counters and is never held while it calls the StoreRegistry, the Catalog, the reader pool
// or the file system, each of which takes its own lock for one call: no lock is nested in
// another, so no order between them exists to get wrong.
//
// Known hazard: a stream of the same job id that passed its ownership check just before a prune
// and opens its store just after it re-creates the job without an owner row, so it is listed as
// the daemon's own (an admin can still read or prune it).

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/catalog/catalog.h"
#include "daemon/retention/disk_budget.h"
#include "daemon/store/store_registry.h"

namespace flopscope::daemon {

// A job's usage with what the catalog says of it (for listings of what a prune would free).
struct JobOnDisk {
  JobUsage usage;
  v1::JobInfo info;
};

// What one budget pass did.
struct BudgetPass {
  uint64_t bytes_before = 0;  // the jobs' files when the pass began
  uint64_t bytes_after = 0;   // ... and when it ended
  std::vector<std::string> pruned;
  bool only_running_left = false;  // still over the budget, and every job left is running
  std::vector<uint32_t> refused;   // the users refused until a later pass (PrunePlan::refused)
};

class JobPruner {
 public:
  // Closes the idle read connections to files under a directory (QueryService::DropReaders).
  using DropReaders = std::function<void(const std::string& directory)>;
  // Told of each job deleted, with its bytes (the /metrics counters); may stay unset.
  using PrunedHook = std::function<void(uint64_t bytes)>;

  JobPruner(std::string data_dir, Catalog* catalog, StoreRegistry* stores, DropReaders drop);
  ~JobPruner();  // stops the pass thread

  // Every job of the catalog with its owner, its bytes on disk and whether it runs (a store
  // open, or a stream the catalog counts as connected).
  absl::StatusOr<std::vector<JobOnDisk>> Jobs() ABSL_LOCKS_EXCLUDED(mu_);

  // Deletes `job_id` (steps 1-5 above); `why` ends its log line ("flopscope prune by uid 1000",
  // "--max-disk 20G"). Returns the bytes freed. NOT_FOUND for a job the catalog does not hold,
  // FAILED_PRECONDITION for a running one (or one being pruned already).
  absl::StatusOr<uint64_t> Prune(const std::string& job_id, absl::string_view why)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Finishes the prunes a crash interrupted (the tombstones under jobs/); returns how many.
  // Call before serving.
  size_t RecoverInterrupted() ABSL_LOCKS_EXCLUDED(mu_);

  // One pass of the budget: measures every job, deletes what PlanPrune chooses and refuses the
  // users it names from now until a pass finds them back under. Logs each deletion, and each
  // user refused or let back in.
  BudgetPass EnforceBudget(const BudgetPolicy& policy) ABSL_LOCKS_EXCLUDED(mu_);
  // A pass now, then one every `period` on a thread of its own until destruction.
  void Start(const BudgetPolicy& policy, absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);

  // For the ingest side, before a session opens and before each batch: RESOURCE_EXHAUSTED
  // ("daemon disk full for uid U: why") when the last pass refused the owner of `job_id`; OK
  // otherwise. One catalog read while some user is refused, nothing else.
  absl::Status CheckWriter(absl::string_view job_id);

  void SetPrunedHook(PrunedHook hook) { pruned_hook_ = std::move(hook); }  // before Start
  uint64_t jobs_pruned() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t bytes_pruned() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Steps 2-5 once the fence is up.
  absl::Status DeleteFenced(const std::string& job_id);
  void Count(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop(BudgetPolicy policy, absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);
  // Logs the pass's end over the budget.
  static void LogOver(const BudgetPass& pass, const BudgetPolicy& policy,
                      const std::vector<JobUsage>& usage);
  // Makes `refused` the users refused, logging who comes and goes.
  void Refuse(const PrunePlan& plan) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string data_dir_;
  Catalog* const catalog_;
  StoreRegistry* const stores_;
  const DropReaders drop_readers_;
  PrunedHook pruned_hook_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t jobs_pruned_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_pruned_ ABSL_GUARDED_BY(mu_) = 0;
  RefusedUsers refused_;  // thread-safe itself
  absl::flat_hash_map<uint32_t, std::string> refused_logged_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// "<data_dir>/jobs/.pruning-<job>": where a job's directory waits to be removed.
std::string PruneTombstone(absl::string_view data_dir, absl::string_view job_id);

}  // namespace flopscope::daemon
