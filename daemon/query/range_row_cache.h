#pragma once

// The range events of rank files, kept in memory between reports (issue 15: `report` and
// `ranks` in under a second while 64 ranks stream).
//
// A report needs every range event of every rank it reads: the per-step figures are medians over
// all steps. Reading them from SQLite is most of a report's cost (a row of eight columns each:
// about 4.8 million rows for 64 ranks of 3000 steps), while between two reports of a live job
// only the events committed since have changed. So the reader keeps each rank file's events, in
// commit order (the folded ones decoded, then the raw ones), and brings them up to date inside
// its read transaction by reading the raw rows past the last one it holds.
//
// When that is exact: range_events only grows (rows are appended by commits) except when a fold
// moves its oldest rows into range_folds, and a file is only ever replaced as a whole (a damaged
// file moved aside, a pruned job). So the rows held are still the file's rows when the folds are
// the same ones (their count and last rowid), the raw rows still reach past the last one held,
// and the path names the same file (device and inode); otherwise they are read again from the
// start. Nothing else of the file is cached: the small tables and instance_stats (late kernels
// update it) are read by every report.
//
// Memory: 32 bytes per event (PackedRange; a 64-rank job of 4.8 million events holds about
// 150 MB), in blocks of kBlockRows that are never copied as the rows grow, within a budget
// (flopscoped --report-cache-mb). A file whose events do not fit is read from SQLite as before,
// never evicting another: a report reads its ranks in turn, and evicting the least recently used
// would evict them all, one by one. So is a file with an event the packed form cannot hold (see
// PackedRange). A file not read for kIdleDrop is let go.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/store/batch_rollup.h"

namespace flopscope::daemon {

// One range event as a report's pass over them needs it, from a raw row or from a fold.
struct RangeRow {
  int64_t sid = 0;
  uint64_t instance_id = 0;
  uint64_t parent_instance_id = 0;
  uint64_t path_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t kind = 0;
  bool counted = false;
};

// The kernels a fold kept of one occurrence (its instance_stats row, folded with it).
struct FoldedActivity {
  int64_t sid = 0;
  uint64_t instance_id = 0;
  InstanceActivity activity;
};

// A RangeRow as the cache holds it: 32 bytes instead of 56. A file's events share a few (sid,
// path_id) pairs, kept once in the file's table (RangeRows) and named here by their index; the
// parent is kept as its distance below the event (the batch validator has it below). An event
// packs when that distance is below 2^32, its kind below 4 and its file has fewer than 2^29
// pairs; a file with one that does not is read from SQLite instead (as one over the budget).
struct PackedRange {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t instance_id;
  uint32_t parent_gap;  // instance_id - parent_instance_id; 0: parent_instance_id 0 (none)
  uint32_t key;         // bits 0-28: the (sid, path_id) pair's index; 29-30: kind; 31: counted
};
static_assert(sizeof(PackedRange) == 32, "PackedRange is the range cache's unit of memory");

// One file's events as of the last report that read it.
struct RangeRows {
  // Rows are kept in blocks of this many (64 KiB): growing never copies the rows held.
  static constexpr size_t kBlockRows = 2048;

  std::vector<FoldedActivity> folded_activity;
  size_t folded_rows = 0;  // the first this many rows came from folds

  // What the rows were read from (see the header comment).
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t fold_count = -1;  // -1: never read
  int64_t last_fold_rowid = 0;
  int64_t last_raw_rowid = 0;

  // The memory held: the blocks, the pairs' table and index, the folds' kernels.
  size_t bytes() const;
  // How many rows are held, in commit order: the folds', then the raw rows'.
  size_t size() const { return size_; }
  // Whether every row read so far packed (PackedRange): when not, the rows are dropped and the
  // file is read from SQLite.
  bool packed() const { return packed_; }
  // Appends `row`; false (and nothing kept) when it does not pack.
  bool Add(const RangeRow& row);
  // Calls `on_row(const RangeRow&)` for every row held, in commit order.
  template <typename OnRow>
  void ForEach(OnRow&& on_row) const {
    for (size_t block = 0; block < blocks_.size(); ++block) {
      const PackedRange* packed = blocks_[block].get();
      const size_t n = std::min(kBlockRows, size_ - block * kBlockRows);
      for (size_t i = 0; i < n; ++i) on_row(Unpack(packed[i]));
    }
  }
  // Brings the rows up to date with `db` (the file at `path`), whose read transaction the
  // caller holds: reads the raw rows past the last one held, or everything again when the file
  // changed otherwise. On failure the rows are left empty and unread.
  absl::Status Refresh(SqliteDb& db, const std::string& path);

 private:
  using Pair = std::pair<int64_t, uint64_t>;  // (sid, path_id)
  static constexpr uint32_t kPairBits = 29;
  static constexpr uint32_t kPairMask = (uint32_t{1} << kPairBits) - 1;

  RangeRow Unpack(const PackedRange& packed) const {
    const Pair& pair = pairs_[packed.key & kPairMask];
    return RangeRow{pair.first,
                    packed.instance_id,
                    packed.parent_gap == 0 ? 0 : packed.instance_id - packed.parent_gap,
                    pair.second,
                    packed.start_ns,
                    packed.end_ns,
                    static_cast<int32_t>((packed.key >> kPairBits) & 3),
                    (packed.key >> 31) != 0};
  }
  void Clear();
  absl::Status ReadFolds(SqliteDb& db);
  absl::Status ReadRawSince(SqliteDb& db, int64_t after_rowid);

  std::vector<std::unique_ptr<PackedRange[]>> blocks_;  // all full but the last
  size_t size_ = 0;
  std::vector<Pair> pairs_;                         // by index
  absl::flat_hash_map<Pair, uint32_t> pair_index_;  // pair -> index
  bool packed_ = true;
};

class RangeRowCache {
 public:
  static constexpr absl::Duration kIdleDrop = absl::Minutes(10);

  explicit RangeRowCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // A file's entry, held exclusively until the Lease goes: the report reading that rank uses
  // and refreshes its rows (another report on the same rank waits for it). An empty lease (no
  // budget, or the rows would not fit) means: read from SQLite.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    RangeRows* rows() const { return rows_; }
    explicit operator bool() const { return rows_ != nullptr; }

   private:
    friend class RangeRowCache;
    Lease(RangeRowCache* cache, const std::string& path, absl::Mutex* mu, RangeRows* rows);
    RangeRowCache* cache_ = nullptr;
    std::string path_;
    absl::Mutex* mu_ = nullptr;
    RangeRows* rows_ = nullptr;
  };

  Lease Take(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

  // Lets go of the entries of files under `directory` (a pruned job's).
  void DropUnder(const std::string& directory) ABSL_LOCKS_EXCLUDED(mu_);

  size_t bytes() ABSL_LOCKS_EXCLUDED(mu_);
  size_t entries() ABSL_LOCKS_EXCLUDED(mu_);
  // How many times a file's rows did not fit the budget (or did not pack).
  uint64_t refused() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A file whose rows did not fit is read from SQLite for this long before it is tried again.
  static constexpr absl::Duration kRefusedFor = absl::Minutes(1);

  struct Entry {
    absl::Mutex mu;  // held by the Lease: one report at a time reads this file's rows
    RangeRows rows ABSL_GUARDED_BY(mu);
    // The rest is under the cache's mu_.
    size_t counted_bytes = 0;  // this entry's share of bytes_
    int users = 0;             // leases taken and not yet returned: the entry stays
    bool dropped = false;      // its job was pruned while leased
    absl::Time last_used;
    absl::Time refused_until;  // did not fit: no lease until then
  };
  // Whether `bytes` of rows for `path` fit the budget beside the others and all of them
  // `packed`; when not, the entry is refused for kRefusedFor (the lease then frees its rows).
  bool Fits(const std::string& path, size_t bytes, bool packed) ABSL_LOCKS_EXCLUDED(mu_);
  // Called when a lease ends: accounts the entry's new size; lets a dropped entry go.
  void Return(const std::string& path, size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void DropIdle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t budget_bytes_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace flopscope::daemon
