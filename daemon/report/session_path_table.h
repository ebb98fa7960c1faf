#pragma once

// A value per (session, path id) of one rank file, looked up for every range event a report
// streams (millions of them), so it is no hash map: path ids are handed out densely per session,
// in first-seen order, and the values sit in a vector per session indexed by id. A file is
// untrusted: ids past kDenseIds (no real session has that many paths) go to a map instead. The
// last session looked up is remembered, since events come session by session.
//
// Not thread-safe: one per report's read of one rank.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace flopscope::daemon {

template <typename V>
class SessionPathTable {
 public:
  static constexpr uint64_t kDenseIds = 1 << 20;

  // `absent`: the value of a (session, path) never set.
  explicit SessionPathTable(V absent) : absent_(absent) {}

  V Get(int64_t sid, uint64_t path_id) { return At(sid, path_id); }

  // The value's slot, `absent` until set. Valid until the next call.
  V& At(int64_t sid, uint64_t path_id) {
    if (path_id >= kDenseIds) return sparse_.try_emplace({sid, path_id}, absent_).first->second;
    if (sid != last_sid_ || last_ == nullptr) {
      last_ = &dense_[sid];  // looked up again for each new session: adding one may move others
      last_sid_ = sid;
    }
    if (path_id >= last_->size()) last_->resize(path_id + 1, absent_);
    return (*last_)[path_id];
  }

  void Clear() {
    dense_.clear();
    sparse_.clear();
    last_sid_ = -1;
    last_ = nullptr;
  }

 private:
  V absent_;
  absl::flat_hash_map<int64_t, std::vector<V>> dense_;
  absl::flat_hash_map<std::pair<int64_t, uint64_t>, V> sparse_;
  int64_t last_sid_ = -1;
  std::vector<V>* last_ = nullptr;
};

}  // namespace flopscope::daemon
