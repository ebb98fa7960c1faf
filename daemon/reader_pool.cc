#include "daemon/reader_pool.h"

#include <sys/resource.h>

#include <algorithm>

#include "daemon/rank_reader.h"

namespace flopscope::daemon {
namespace {

constexpr size_t kMaxIdle = 4096;
// Descriptors left to everything else: streams, the catalog, the writers' rank files.
constexpr rlim_t kReservedFiles = 512;
constexpr rlim_t kFilesPerConnection = 3;  // database, WAL, and a share of the WAL index

}  // namespace

size_t ReaderPool::CapacityForFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMaxIdle;
  if (limit.rlim_cur <= kReservedFiles) return 0;
  return std::min<size_t>(kMaxIdle, (limit.rlim_cur - kReservedFiles) / kFilesPerConnection);
}

absl::StatusOr<std::unique_ptr<SqliteDb>> ReaderPool::Take(const std::string& path) {
  {
    absl::MutexLock lock(&mu_);  // guards idle_ and by_path_
    if (auto it = by_path_.find(path); it != by_path_.end()) {
      std::unique_ptr<SqliteDb> db = std::move(*it->second);
      idle_.erase(it->second);
      by_path_.erase(it);
      return db;
    }
  }
  return RankReader::Open(path);  // outside the lock: other reports go on meanwhile
}

void ReaderPool::GiveBack(std::unique_ptr<SqliteDb> db) {
  if (db == nullptr) return;
  std::unique_ptr<SqliteDb> closed;  // closed after the lock is released
  {
    absl::MutexLock lock(&mu_);  // guards idle_ and by_path_
    if (capacity_ == 0 || by_path_.contains(db->path())) {
      closed = std::move(db);  // one idle connection per file is enough
    } else {
      idle_.push_front(std::move(db));
      by_path_[idle_.front()->path()] = idle_.begin();
      if (idle_.size() > capacity_) {
        closed = std::move(idle_.back());
        by_path_.erase(closed->path());
        idle_.pop_back();
      }
    }
  }
}

absl::Status ReaderPool::Warm(const std::string& path) {
  {
    absl::MutexLock lock(&mu_);  // guards by_path_
    if (capacity_ == 0 || by_path_.contains(path)) return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankReader::Open(path);  // outside the lock
  if (!db.ok()) return db.status();
  GiveBack(*std::move(db));
  return absl::OkStatus();
}

bool ReaderPool::full() {
  absl::MutexLock lock(&mu_);  // guards idle_
  return idle_.size() >= capacity_;
}

size_t ReaderPool::idle() {
  absl::MutexLock lock(&mu_);  // guards idle_
  return idle_.size();
}

}  // namespace flopscope::daemon
