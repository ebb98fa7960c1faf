#pragma once

// The disk budget of a data directory (flopscoped --max-disk, --max-disk-per-user,
// --prune-grace-s; docs/design/storage.md): which jobs to delete, by each user's share, so that
// the jobs' files fit, and which users to refuse when deleting cannot. Folding (step_folding.h)
// keeps a running job small; the budget is what bounds the many finished jobs a node accumulates.
//
// The policy, the measuring and the option's parsing are here; daemon/retention/job_pruner.h
// deletes what the policy chooses (the periodic pass, and `flopscope prune`).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace flopscope::daemon {

// One job as the budget sees it.
struct JobUsage {
  std::string job_id;
  int64_t last_seen_ns = 0;  // the catalog's JobInfo.last_seen_ns (a finished job: its end)
  uint64_t bytes = 0;        // JobBytes
  bool running = false;      // some rank connected (or its store open): never deleted
  uint32_t owner = 0;        // the catalog's JobOwners
};

// What a budget pass works to: --max-disk, --max-disk-per-user and --prune-grace-s.
struct BudgetPolicy {
  uint64_t max_bytes = 0;           // the jobs' files together; 0: no budget
  uint64_t max_bytes_per_user = 0;  // one owner's jobs; 0: no quota
  int64_t grace_ns = 0;             // a job that ended less than this ago is never deleted
};

// What a pass is to do: the jobs to delete, and the users whose new sessions and batches the
// daemon refuses until a later pass finds them back under (uid -> why, a sentence).
struct PrunePlan {
  std::vector<std::string> doomed;  // in deletion order
  absl::flat_hash_map<uint32_t, std::string> refused;
};

// The plan for `jobs` at `now_ns` (issue 34, campaign row 5d: one user's flood must not delete
// another user's data). While the jobs take more than `max_bytes`, a user's share is
// max_bytes / the number of users holding data; the user furthest over its share (the most
// bytes) loses its oldest finished job (least recently seen; ties: the larger, then by id), then
// the shares are taken again. Never a running job, never one seen less than `grace_ns` ago, and
// never a job of a user within its share: when every user over its share holds only such jobs,
// the pass stops over the budget and those users are refused instead, when another user holds
// data too (alone, a user's running jobs go on, folded, as they always did). A user whose jobs take
// at least `max_bytes_per_user` after the plan is refused too (a quota deletes nothing).
PrunePlan PlanPrune(std::vector<JobUsage> jobs, const BudgetPolicy& policy, int64_t now_ns);

// The bytes of the regular files under a job's directory (its rank files, their WAL and
// shared-memory files). A missing directory is 0.
absl::StatusOr<uint64_t> JobBytes(absl::string_view job_directory);

// The users a budget pass refuses (PrunePlan::refused), for the ingest side to check before a new
// session and each batch. Thread-safe: the pass thread sets, stream threads check; the mutex is
// held for one copy or one lookup and nothing is called under it.
class RefusedUsers {
 public:
  void Set(absl::flat_hash_map<uint32_t, std::string> refused) ABSL_LOCKS_EXCLUDED(mu_);
  // RESOURCE_EXHAUSTED "daemon disk full for uid U: <why>" for a refused user (so a producer
  // keeps or spools its records as for a full disk, and says why); OK otherwise.
  absl::Status Check(uint32_t uid) const ABSL_LOCKS_EXCLUDED(mu_);
  bool empty() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, std::string> refused_ ABSL_GUARDED_BY(mu_);
};

// --max-disk's (or `option`'s) value: a positive size, a number (decimals allowed) with an optional
// unit B, K, M, G or T (powers of 1024, as du and df count; "KiB", "KB" and "k" read the same),
// e.g. "20G", "500M", "1.5T", "4096". INVALID_ARGUMENT saying the form otherwise.
absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text,
                                       absl::string_view option = "--max-disk");

}  // namespace flopscope::daemon
