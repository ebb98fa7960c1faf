#include "daemon/query/reader_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "daemon/query/rank_reader.h"

namespace flopscope::daemon {
namespace {

constexpr size_t kMaxIdle = 4096;

}  // namespace

size_t ReaderPool::CapacityForFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMaxIdle;
  if (limit.rlim_cur <= kReservedDescriptors) return 0;
  const rlim_t for_readers = (limit.rlim_cur - kReservedDescriptors) / 2;  // half: see the header
  return std::min<size_t>(kMaxIdle, for_readers / kDescriptorsPerIdleConnection);
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
    // A file gone meanwhile (its job pruned: DropUnder) is not kept: checked under the lock,
    // so a prune that renames the file and then drops cannot miss this connection.
    if (capacity_ == 0 || by_path_.contains(db->path()) || access(db->path().c_str(), F_OK) != 0) {
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

size_t ReaderPool::DropUnder(const std::string& directory) {
  const std::string prefix = directory + "/";
  Idle dropped;  // closed after the lock is released
  {
    absl::MutexLock lock(&mu_);  // guards idle_ and by_path_
    for (auto it = idle_.begin(); it != idle_.end();) {
      if ((*it)->path().rfind(prefix, 0) != 0) {
        ++it;
        continue;
      }
      by_path_.erase((*it)->path());
      auto next = std::next(it);
      dropped.splice(dropped.end(), idle_, it);
      it = next;
    }
  }
  return dropped.size();
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
