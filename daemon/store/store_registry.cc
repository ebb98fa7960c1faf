// StoreRegistry: the table of open RankStores, one per (job, rank), and the prune fence. The
// table lock covers look-ups only; files open under their key's own lock (store_registry.h).
#include "daemon/store/store_registry.h"

#include "absl/strings/str_cat.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/left_alone_files.h"

namespace flopscope::daemon {

StoreRegistry::StoreRegistry(std::string data_dir, FoldPolicy fold, Opener open)
    : data_dir_(data_dir), space_(std::move(data_dir)), fold_(fold), open_(std::move(open)) {}

absl::StatusOr<std::shared_ptr<RankStore>> StoreRegistry::Acquire(absl::string_view job_id,
                                                                  int32_t rank) {
  Key key(std::string(job_id), rank);
  std::shared_ptr<absl::Mutex> open_mu;
  {
    absl::MutexLock lock(&mu_);  // the fence check and the count of this Acquire are one step
    if (pruning_.contains(job_id)) {
      return absl::UnavailableError(
          absl::StrCat("job '", job_id, "' is being pruned (its old data deleted); retry"));
    }
    if (!slots_.contains(key)) ForgetClosed();  // a new key: drop the closed ones first
    Slot& slot = slots_[key];
    if (std::shared_ptr<RankStore> open = slot.store.lock()) return open;
    ++slot.acquiring;  // from here BeginPrune refuses the job until Finish
    open_mu = slot.open_mu;
  }
  absl::MutexLock key_lock(open_mu.get());  // one open per file; other keys open meanwhile
  // A stream of the same rank may have opened the store while this one waited for the key.
  std::shared_ptr<RankStore> store = Published(key);
  absl::Status status;
  if (store == nullptr) {
    absl::StatusOr<std::unique_ptr<RankStore>> opened = OpenFile(job_id, rank);
    if (opened.ok()) {
      store = *std::move(opened);
    } else {
      status = opened.status();
    }
  }
  Finish(key, store);  // under the key's lock: a stream waiting for it then finds the store
  if (!status.ok()) return status;
  return store;
}

std::shared_ptr<RankStore> StoreRegistry::Published(const Key& key) {
  absl::MutexLock lock(&mu_);  // guards slots_
  auto it = slots_.find(key);
  return it == slots_.end() ? nullptr : it->second.store.lock();
}

absl::StatusOr<std::unique_ptr<RankStore>> StoreRegistry::OpenFile(absl::string_view job_id,
                                                                   int32_t rank) {
  if (absl::Status s = EnsureDirectory(JobDirectory(data_dir_, job_id)); !s.ok()) return s;
  // The usual file, or the one beside it when the usual one must be left alone.
  absl::StatusOr<RankFile> file = RankFileForWriting(data_dir_, job_id, rank);
  if (!file.ok()) return file.status();
  if (open_) return open_(job_id, rank, file->path);
  return RankStore::Open(file->path, fold_);
}

void StoreRegistry::Finish(const Key& key, const std::shared_ptr<RankStore>& store) {
  absl::MutexLock lock(&mu_);  // guards slots_
  Slot& slot = slots_[key];    // present: `acquiring` kept it
  if (store != nullptr) slot.store = store;
  --slot.acquiring;
  if (slot.acquiring == 0 && slot.store.expired()) slots_.erase(key);  // a failed open
}

size_t StoreRegistry::open_count() {
  absl::MutexLock lock(&mu_);  // guards slots_
  ForgetClosed();
  size_t open = 0;
  for (const auto& [key, slot] : slots_) open += slot.store.expired() ? 0 : 1;
  return open;
}

absl::flat_hash_set<std::string> StoreRegistry::OpenJobs() {
  absl::MutexLock lock(&mu_);  // guards slots_
  ForgetClosed();
  absl::flat_hash_set<std::string> jobs;
  for (const auto& [key, slot] : slots_) jobs.insert(key.first);  // open or being opened
  return jobs;
}

absl::Status StoreRegistry::BeginPrune(absl::string_view job_id) {
  absl::MutexLock lock(&mu_);  // the check and the fence in one step: no Acquire between them
  if (Running(job_id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id, "' is running (a rank is connected): prune it once it has ended"));
  }
  if (!pruning_.insert(std::string(job_id)).second) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_id, "' is being pruned already"));
  }
  return absl::OkStatus();
}

void StoreRegistry::EndPrune(absl::string_view job_id) {
  absl::MutexLock lock(&mu_);  // guards pruning_
  pruning_.erase(job_id);
}

bool StoreRegistry::Running(absl::string_view job_id) {
  ForgetClosed();  // what is left is open or being opened
  for (const auto& [key, slot] : slots_) {
    if (key.first == job_id) return true;
  }
  return false;
}

void StoreRegistry::ForgetClosed() {
  absl::erase_if(slots_, [](const auto& entry) {
    return entry.second.acquiring == 0 && entry.second.store.expired();
  });
}

}  // namespace flopscope::daemon
