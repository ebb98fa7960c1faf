#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/types/span.h"

namespace flopscope::daemon {

// The range instance ids one session has stored, as disjoint closed intervals [lo, hi], so that
// a later batch repeating an occurrence is refused instead of counted a second time (a resend
// of a whole batch is dropped earlier, by its seq). The injector numbers occurrences at push and
// sends them at pop, so the ids arrive nearly in order and a session holds few intervals: one
// per range still open, plus one per run of records dropped before they were sent. Persisted in
// the rank file's range_instance_ids table (schema/rank.sql) by RankStore, which loads it when a
// session is resumed.
//
// Thread-compatible: RankStore uses it under its mutex.
class InstanceIdSet {
 public:
  using Interval = std::pair<uint64_t, uint64_t>;  // [lo, hi], both included

  // What one Add changed, for the table: intervals gone (by lo) and intervals new or grown.
  struct Change {
    std::vector<uint64_t> removed;
    std::vector<Interval> written;
  };

  bool Contains(uint64_t id) const;
  // Adds `ids`, none of which Contains (the caller checked, and a batch repeats none).
  Change Add(absl::Span<const uint64_t> ids);
  // A stored interval, as the table holds it (loading a resumed session).
  void Insert(Interval interval) { by_lo_[interval.first] = interval.second; }

  size_t interval_count() const { return by_lo_.size(); }
  std::vector<Interval> Intervals() const { return {by_lo_.begin(), by_lo_.end()}; }

 private:
  // Adds one id; `touched` gathers the los of intervals it grew or made, `removed` the los it
  // merged away, `made` the los it made.
  void AddOne(uint64_t id, std::vector<uint64_t>* touched, std::vector<uint64_t>* removed,
              std::vector<uint64_t>* made);

  absl::btree_map<uint64_t, uint64_t> by_lo_;  // lo -> hi
};

}  // namespace flopscope::daemon
