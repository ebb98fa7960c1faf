#include "daemon/store_registry.h"

#include "daemon/data_layout.h"

namespace flopscope::daemon {

absl::StatusOr<std::shared_ptr<RankStore>> StoreRegistry::Acquire(absl::string_view job_id,
                                                                  int32_t rank) {
  absl::MutexLock lock(&mu_);  // held while opening: one open per file, however many streams
  Key key(std::string(job_id), rank);
  if (std::shared_ptr<RankStore> open = stores_[key].lock()) return open;
  ForgetClosed();
  if (absl::Status s = EnsureDirectory(JobDirectory(data_dir_, job_id)); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<RankStore>> store =
      RankStore::Open(RankFilePath(data_dir_, job_id, rank), fold_);
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

void StoreRegistry::ForgetClosed() {
  absl::erase_if(stores_, [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace flopscope::daemon
