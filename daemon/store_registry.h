#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/disk_space.h"
#include "daemon/rank_store.h"

namespace flopscope::daemon {

// The open RankStores, one per (job, rank), shared by every stream of that rank. A store stays
// open while some stream holds it and is closed (its WAL checkpointed) when the last one lets go,
// so a node that sees many jobs over time does not pile up open files.
//
// Thread-safe: a mutex guards the table; opening a store happens under it, so two streams of one
// rank never open the file twice.
class StoreRegistry {
 public:
  // Stores fold old steps as `fold` says (step_folding.h).
  explicit StoreRegistry(std::string data_dir, FoldPolicy fold = {})
      : data_dir_(data_dir), space_(std::move(data_dir)), fold_(fold) {}

  // RESOURCE_EXHAUSTED "daemon disk full: ..." while the data directory's file system is under
  // its reserve (DiskSpaceGuard) once `incoming_bytes` are written: checked before a session
  // opens and before every batch.
  absl::Status CheckSpace(uint64_t incoming_bytes = 0) const {
    return space_.Check(incoming_bytes);
  }

  // Opens (creating its directory and file when missing) or shares the store of `job_id`/`rank`:
  // its usual file, or the one beside it when the usual one must be left alone
  // (left_alone_files.h). `job_id` must have passed JobIdProblem.
  absl::StatusOr<std::shared_ptr<RankStore>> Acquire(absl::string_view job_id, int32_t rank)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stores some stream still holds.
  size_t open_count() ABSL_LOCKS_EXCLUDED(mu_);
  // Jobs with a store some stream (or a spool delivery) holds: running, never pruned.
  absl::flat_hash_set<std::string> OpenJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // The prune fence (daemon/job_pruner.h). BeginPrune: FAILED_PRECONDITION while a store of
  // `job_id` is open (it is running); else, until EndPrune, Acquire refuses the job with
  // UNAVAILABLE (its producer retries, and finds a fresh job once the prune is over), so no
  // stream writes the files or catalog rows being deleted.
  absl::Status BeginPrune(absl::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);
  void EndPrune(absl::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& data_dir() const { return data_dir_; }

 private:
  using Key = std::pair<std::string, int32_t>;
  void ForgetClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string data_dir_;
  const DiskSpaceGuard space_;
  const FoldPolicy fold_;
  absl::Mutex mu_;
  absl::flat_hash_map<Key, std::weak_ptr<RankStore>> stores_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> pruning_ ABSL_GUARDED_BY(mu_);  // jobs behind the fence
};

}  // namespace flopscope::daemon
