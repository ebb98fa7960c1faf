#include "daemon/store/instance_id_set.h"

#include <algorithm>
#include <limits>

namespace flopscope::daemon {

bool InstanceIdSet::Contains(uint64_t id) const {
  auto after = by_lo_.upper_bound(id);  // the first interval starting past id
  if (after == by_lo_.begin()) return false;
  return std::prev(after)->second >= id;
}

void InstanceIdSet::AddOne(uint64_t id, std::vector<uint64_t>* touched,
                           std::vector<uint64_t>* removed, std::vector<uint64_t>* made) {
  auto next = by_lo_.upper_bound(id);
  const bool joins_next =
      next != by_lo_.end() && id != std::numeric_limits<uint64_t>::max() && next->first == id + 1;
  if (next != by_lo_.begin()) {
    auto before = std::prev(next);
    if (id != 0 && before->second == id - 1) {  // grows the interval before
      before->second = joins_next ? next->second : id;
      touched->push_back(before->first);
      if (joins_next) {  // erasing invalidates every iterator of a btree: the last use
        removed->push_back(next->first);
        by_lo_.erase(next);
      }
      return;
    }
  }
  uint64_t hi = id;
  if (joins_next) {  // starts the interval after one earlier
    hi = next->second;
    removed->push_back(next->first);
    by_lo_.erase(next);
  }
  by_lo_[id] = hi;
  touched->push_back(id);
  made->push_back(id);
}

InstanceIdSet::Change InstanceIdSet::Add(absl::Span<const uint64_t> ids) {
  std::vector<uint64_t> touched;
  std::vector<uint64_t> removed;
  std::vector<uint64_t> made;
  for (uint64_t id : ids) AddOne(id, &touched, &removed, &made);
  // A lo merged away never comes back (the id below it is in the set for good), but one this
  // Add made may have been merged away again by a later id: such a row was never written, and
  // of the rest only what still stands is.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::sort(made.begin(), made.end());
  Change change;
  for (uint64_t lo : touched) {
    auto it = by_lo_.find(lo);
    if (it != by_lo_.end()) change.written.emplace_back(it->first, it->second);
  }
  for (uint64_t lo : removed) {
    if (!std::binary_search(made.begin(), made.end(), lo)) change.removed.push_back(lo);
  }
  std::sort(change.removed.begin(), change.removed.end());
  return change;
}

}  // namespace flopscope::daemon
