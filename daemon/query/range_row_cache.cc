#include "daemon/query/range_row_cache.h"

#include <sys/stat.h>

#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/query/rank_reader.h"

namespace flopscope::daemon {
namespace {

// What says whether the rows held are still the file's (see the header comment).
struct TableMarks {
  int64_t fold_count = 0;
  int64_t last_fold_rowid = 0;
  int64_t last_raw_rowid = 0;
};

absl::StatusOr<TableMarks> ReadMarks(SqliteDb& db) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(
      "SELECT (SELECT COUNT(*) FROM range_folds), "
      "(SELECT COALESCE(MAX(rowid), 0) FROM range_folds), "
      "(SELECT COALESCE(MAX(rowid), 0) FROM range_events)");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("no row from the range tables' marks");
  return TableMarks{(*stmt)->ColumnInt(0), (*stmt)->ColumnInt(1), (*stmt)->ColumnInt(2)};
}

}  // namespace

size_t RangeRows::bytes() const {
  return blocks_.size() * kBlockRows * sizeof(PackedRange) +
         blocks_.capacity() * sizeof(blocks_[0]) + pairs_.capacity() * sizeof(Pair) +
         pair_index_.capacity() * (sizeof(std::pair<const Pair, uint32_t>) + 1) +
         folded_activity.capacity() * sizeof(FoldedActivity);
}

bool RangeRows::Add(const RangeRow& row) {
  const bool has_parent = row.parent_instance_id != 0;
  const uint64_t gap = row.instance_id - row.parent_instance_id;
  if (has_parent &&
      (row.parent_instance_id >= row.instance_id || gap > std::numeric_limits<uint32_t>::max())) {
    return false;
  }
  if (row.kind < 0 || row.kind > 3) return false;
  const Pair pair{row.sid, row.path_id};
  auto [it, added] = pair_index_.try_emplace(pair, static_cast<uint32_t>(pairs_.size()));
  if (added) {
    if (pairs_.size() > kPairMask) {
      pair_index_.erase(it);
      return false;
    }
    pairs_.push_back(pair);
  }
  if (size_ == blocks_.size() * kBlockRows) {
    // Left uninitialized: every row is written before it is read.
    blocks_.push_back(std::make_unique_for_overwrite<PackedRange[]>(kBlockRows));
  }
  blocks_.back()[size_ % kBlockRows] = PackedRange{
      row.start_ns, row.end_ns, row.instance_id, has_parent ? static_cast<uint32_t>(gap) : 0,
      it->second | static_cast<uint32_t>(row.kind) << kPairBits |
          static_cast<uint32_t>(row.counted) << 31};
  ++size_;
  return true;
}

void RangeRows::Clear() {
  // Assigned, not cleared: the memory goes too.
  folded_activity = decltype(folded_activity)();
  blocks_ = decltype(blocks_)();
  size_ = 0;
  pairs_ = decltype(pairs_)();
  pair_index_ = decltype(pair_index_)();
  packed_ = true;
  folded_rows = 0;
  fold_count = -1;
  last_fold_rowid = 0;
  last_raw_rowid = 0;
}

absl::Status RangeRows::ReadFolds(SqliteDb& db) {
  return ForEachFoldedRange(db, [&](const FoldedRange& event) {
    if (!packed_) return;
    if (event.has_stats) folded_activity.push_back({event.sid, event.instance_id, event.stats});
    packed_ = Add({event.sid, event.instance_id, event.parent_instance_id, event.path_id,
                   event.start_ns, event.end_ns, event.kind, event.counted});
  });
}

absl::Status RangeRows::ReadRawSince(SqliteDb& db, int64_t after_rowid) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(
      "SELECT rowid, sid, instance_id, parent_instance_id, path_id, start_ns, end_ns, kind, "
      "counted FROM range_events WHERE rowid > ? ORDER BY rowid");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, after_rowid);
  while (true) {
    absl::StatusOr<bool> more = (*stmt)->Step();
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    const SqliteStatement& row = **stmt;
    last_raw_rowid = row.ColumnInt(0);
    packed_ = Add({row.ColumnInt(1), row.ColumnUint(2), row.ColumnUint(3), row.ColumnUint(4),
                   row.ColumnInt(5), row.ColumnInt(6), static_cast<int32_t>(row.ColumnInt(7)),
                   row.ColumnInt(8) != 0});
    if (!packed_) return absl::OkStatus();  // the caller drops the rows: read from the file
  }
}

absl::Status RangeRows::Refresh(SqliteDb& db, const std::string& path) {
  struct stat file {};
  if (stat(path.c_str(), &file) != 0) {
    Clear();
    return absl::NotFoundError(absl::StrCat("cannot stat ", path));
  }
  absl::StatusOr<TableMarks> marks = ReadMarks(db);
  if (!marks.ok()) {
    Clear();
    return marks.status();
  }
  const bool same_file = fold_count >= 0 && device == static_cast<uint64_t>(file.st_dev) &&
                         inode == static_cast<uint64_t>(file.st_ino);
  const bool same_folds =
      fold_count == marks->fold_count && last_fold_rowid == marks->last_fold_rowid;
  if (!same_file || !same_folds || marks->last_raw_rowid < last_raw_rowid || !packed_) {
    // Read from the start: a new file, a fold since (it moved raw rows into range_folds), raw
    // rows gone from under the last one held, or a last read that did not pack.
    Clear();
    if (absl::Status s = ReadFolds(db); !s.ok()) {
      Clear();
      return s;
    }
    folded_rows = size_;
    device = static_cast<uint64_t>(file.st_dev);
    inode = static_cast<uint64_t>(file.st_ino);
    fold_count = marks->fold_count;
    last_fold_rowid = marks->last_fold_rowid;
  }
  if (packed_) {
    if (absl::Status s = ReadRawSince(db, last_raw_rowid); !s.ok()) {
      Clear();
      return s;
    }
  }
  if (!packed_) {
    // An event the packed form cannot hold: nothing is kept, the caller reads the file.
    Clear();
    packed_ = false;
  }
  return absl::OkStatus();
}

// Lock hazard: the entry's mutex is taken here and released by the lease's destructor, on the
// same thread (a report's read of one rank); clang cannot follow a lock across the two.
RangeRowCache::Lease::Lease(RangeRowCache* cache, const std::string& path, absl::Mutex* mu,
                            RangeRows* rows)
    : cache_(cache), path_(path), mu_(mu), rows_(rows) {}

RangeRowCache::Lease::Lease(Lease&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)),
      path_(std::move(other.path_)),
      mu_(std::exchange(other.mu_, nullptr)),
      rows_(std::exchange(other.rows_, nullptr)) {}

RangeRowCache::Lease::~Lease() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (rows_ == nullptr) return;
  size_t bytes = rows_->bytes();
  if (!cache_->Fits(path_, bytes, rows_->packed())) {
    RangeRows none;
    std::swap(*rows_, none);  // frees the rows now, under the entry's lock
    bytes = 0;
  }
  mu_->Unlock();  // from here the rows are the next lease's: not read again
  cache_->Return(path_, bytes);
}

RangeRowCache::Lease RangeRowCache::Take(const std::string& path) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (budget_bytes_ == 0) return Lease();
  Entry* entry = nullptr;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    DropIdle(now);
    std::unique_ptr<Entry>& slot = entries_[path];
    if (slot == nullptr) slot = std::make_unique<Entry>();
    entry = slot.get();
    if (now < entry->refused_until) return Lease();
    ++entry->users;  // keeps the entry alive until Return
    entry->last_used = now;
  }
  // Lock order: an entry's mu, then the cache's mu_ (Fits, Return); never the other way.
  entry->mu.Lock();
  return Lease(this, path, &entry->mu, &entry->rows);
}

bool RangeRowCache::Fits(const std::string& path, size_t bytes, bool packed) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(path);
  if (it == entries_.end()) return false;
  Entry& entry = *it->second;
  if (packed && bytes_ - entry.counted_bytes + bytes <= budget_bytes_) return true;
  // It does not fit (or pack): let it go, and read this file from SQLite for a while.
  entry.refused_until = absl::Now() + kRefusedFor;
  ++refused_;
  return false;
}

void RangeRowCache::Return(const std::string& path, size_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(path);
  if (it == entries_.end()) return;
  Entry& entry = *it->second;
  bytes_ = bytes_ - entry.counted_bytes + bytes;
  entry.counted_bytes = bytes;
  if (--entry.users > 0) return;
  // A pruned job's entry goes; so does an empty one, unless it remembers a refusal.
  const bool refused = entry.refused_until > absl::Now();
  if (entry.dropped || (bytes == 0 && !refused)) {
    bytes_ -= entry.counted_bytes;
    entries_.erase(it);
  }
}

void RangeRowCache::DropIdle(absl::Time now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = *it->second;
    if (entry.users == 0 && now - entry.last_used > kIdleDrop) {
      bytes_ -= entry.counted_bytes;
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

void RangeRowCache::DropUnder(const std::string& directory) {
  const std::string prefix = absl::StrCat(directory, "/");
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = *it->second;
    if (!absl::StartsWith(it->first, prefix)) {
      ++it;
    } else if (entry.users > 0) {
      entry.dropped = true;  // its report still reads it; Return lets it go
      ++it;
    } else {
      bytes_ -= entry.counted_bytes;
      entries_.erase(it++);
    }
  }
}

size_t RangeRowCache::bytes() {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t RangeRowCache::entries() {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

uint64_t RangeRowCache::refused() {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace flopscope::daemon
