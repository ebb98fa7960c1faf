#include "daemon/store_registry.h"

#include "absl/strings/str_cat.h"
#include "daemon/data_layout.h"
#include "daemon/left_alone_files.h"

namespace flopscope::daemon {

absl::StatusOr<std::shared_ptr<RankStore>> StoreRegistry::Acquire(absl::string_view job_id,
                                                                  int32_t rank) {
  absl::MutexLock lock(&mu_);  // held while opening: one open per file, however many streams
  if (pruning_.contains(job_id)) {
    return absl::UnavailableError(
        absl::StrCat("job '", job_id, "' is being pruned (its old data deleted); retry"));
  }
  Key key(std::string(job_id), rank);
  if (std::shared_ptr<RankStore> open = stores_[key].lock()) return open;
  ForgetClosed();
  if (absl::Status s = EnsureDirectory(JobDirectory(data_dir_, job_id)); !s.ok()) return s;
  // The usual file, or the one beside it when the usual one must be left alone.
  absl::StatusOr<RankFile> file = RankFileForWriting(data_dir_, job_id, rank);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(file->path, fold_);
  if (!store.ok()) return store.status();
  std::shared_ptr<RankStore> shared = *std::move(store);
  stores_[key] = shared;
  return shared;
}

size_t StoreRegistry::open_count() {
  absl::MutexLock lock(&mu_);  // guards stores_
  ForgetClosed();
  return stores_.size();
}

absl::flat_hash_set<std::string> StoreRegistry::OpenJobs() {
  absl::MutexLock lock(&mu_);  // guards stores_
  ForgetClosed();
  absl::flat_hash_set<std::string> jobs;
  for (const auto& [key, store] : stores_) jobs.insert(key.first);
  return jobs;
}

absl::Status StoreRegistry::BeginPrune(absl::string_view job_id) {
  absl::MutexLock lock(&mu_);  // the check and the fence in one step: no Acquire between them
  ForgetClosed();
  for (const auto& [key, store] : stores_) {
    if (key.first == job_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job_id, "' is running (a rank is connected): prune it once it has ended"));
    }
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

void StoreRegistry::ForgetClosed() {
  absl::erase_if(stores_, [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace flopscope::daemon
