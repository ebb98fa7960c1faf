#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/store/disk_space.h"
#include "daemon/store/rank_store.h"

namespace flopscope::daemon {

// The open RankStores, one per (job, rank), shared by every stream of that rank. A store stays
// open while some stream holds it and is closed (its WAL checkpointed) when the last one lets go,
// so a node that sees many jobs over time does not pile up open files.
//
// Thread-safe. Locks: `mu_` guards the table and is held only to look a key up or to publish
// what an open gave; each key has its own mutex, held while that key's file is opened (creating
// it, WAL, schema checks: milliseconds each, longer on a busy disk). So the 64 ranks of a job
// that start at once open their files side by side, while two streams of one rank still never
// open the file twice: the second waits on the key's mutex and gets the first one's store.
// Order: a key's mutex before `mu_` (never the other way round).
class StoreRegistry {
 public:
  // Opens the store of `job_id`/`rank` at `path` (the file RankFileForWriting chose). The
  // default is RankStore::Open with the registry's FoldPolicy; tests pass their own to hold an
  // open at a chosen point.
  using Opener = std::function<absl::StatusOr<std::unique_ptr<RankStore>>(
      absl::string_view job_id, int32_t rank, const std::string& path)>;

  // Stores fold old steps as `fold` says (step_folding.h).
  explicit StoreRegistry(std::string data_dir, FoldPolicy fold = {}, Opener open = nullptr);

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

  // Stores some stream holds.
  size_t open_count() ABSL_LOCKS_EXCLUDED(mu_);
  // Jobs with a store some stream (or a spool delivery) holds or is opening: running, never
  // pruned.
  absl::flat_hash_set<std::string> OpenJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // The prune fence (daemon/retention/job_pruner.h). BeginPrune: FAILED_PRECONDITION while a store
  // of `job_id` is open or being opened (it is running); else, until EndPrune, Acquire refuses the
  // job with UNAVAILABLE (its producer retries, and finds a fresh job once the prune is over),
  // so no stream writes the files or catalog rows being deleted.
  absl::Status BeginPrune(absl::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);
  void EndPrune(absl::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& data_dir() const { return data_dir_; }

 private:
  using Key = std::pair<std::string, int32_t>;
  // One key's entry. It stays in the table while its store is open or an Acquire of it is
  // under way (`acquiring`), so every Acquire of the key finds the same `open_mu`.
  struct Slot {
    std::weak_ptr<RankStore> store;  // the open store; expired once every holder let go
    int acquiring = 0;               // Acquires past the fence that have not returned yet
    std::shared_ptr<absl::Mutex> open_mu = std::make_shared<absl::Mutex>();  // held to open
  };

  // The open store of `key`, or null; `mu_` is taken for the look-up only.
  std::shared_ptr<RankStore> Published(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Creates the job's directory and opens the rank's file (no registry lock held).
  absl::StatusOr<std::unique_ptr<RankStore>> OpenFile(absl::string_view job_id, int32_t rank);
  // Ends one Acquire of `key`, publishing `store` when it opened one.
  void Finish(const Key& key, const std::shared_ptr<RankStore>& store) ABSL_LOCKS_EXCLUDED(mu_);
  // True while a store of `job_id` is open or being opened.
  bool Running(absl::string_view job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string data_dir_;
  const DiskSpaceGuard space_;
  const FoldPolicy fold_;
  const Opener open_;
  absl::Mutex mu_;
  absl::flat_hash_map<Key, Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> pruning_ ABSL_GUARDED_BY(mu_);  // jobs behind the fence
};

}  // namespace flopscope::daemon
