#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/store/batch_rollup.h"

namespace flopscope::daemon {

// GPU span and busy time of a module, summed over its occurrences.
struct PathSpan {
  int64_t sid = 0;
  uint64_t path_id = 0;
  int64_t span_ns = 0;  // first kernel start to last kernel end, per occurrence, summed
  int64_t busy_ns = 0;  // time some kernel ran, per occurrence, summed
  uint64_t occurrences = 0;
};

// One completed occurrence with kernels (its own or its children's), for per-step figures.
struct OccurrenceSpan {
  int64_t sid = 0;
  uint64_t path_id = 0;
  int64_t first_start_ns = 0;
  int64_t span_ns = 0;
  int64_t busy_ns = 0;  // capped at span_ns, as in the totals
};

// Rolls the kernels of each range occurrence (instance_stats) up to the occurrences enclosing
// it, so that a module's span covers the kernels of its children too (DESIGN: Time).
//
// Feed every occurrence with kernels first, then the module range events in the order they were
// committed: a push/pop range closes after all of its children on the same thread, and one
// thread's events are committed in that order, so an occurrence is complete when its own range
// event comes. At that point its span is added to its path and merged into its parent. Memory
// is proportional to the occurrences with kernels, not to the range events streamed past.
//
// Busy time of an occurrence with children is the sum of its parts' busy time, capped at its
// span: kernels of two children running at once on different streams are counted twice up to
// that cap. Occurrences whose range never closed count on their own path.
class SpanRollup {
 public:
  void AddOccurrence(int64_t sid, uint64_t key, const InstanceActivity& activity);
  // One module range event (RANGE_KIND_PUSH_POP), in commit order. Returns the occurrence it
  // completed when that had kernels.
  std::optional<OccurrenceSpan> AddRange(int64_t sid, uint64_t instance_id,
                                         uint64_t parent_instance_id, uint64_t path_id);
  // The per-path totals; the rollup is empty afterwards. `unclosed`, when given, receives the
  // occurrences no range event completed (graph replays, ranges open at exit) with a known path.
  std::vector<PathSpan> Finish(std::vector<OccurrenceSpan>* unclosed = nullptr);

  bool empty() const { return pending_.empty() && totals_.empty(); }

 private:
  using Key = std::pair<int64_t, uint64_t>;  // (session, instance or path)
  struct Pending {
    uint64_t path_id = 0;  // 0 until known (a parent merged into before its own row)
    int64_t first_start_ns = 0;
    int64_t last_end_ns = 0;
    int64_t busy_ns = 0;
    bool has_kernels = false;
  };
  static void Merge(const Pending& from, Pending& to);
  std::optional<OccurrenceSpan> Complete(int64_t sid, uint64_t path_id, const Pending& occurrence);

  absl::flat_hash_map<Key, Pending> pending_;
  absl::flat_hash_map<Key, PathSpan> totals_;
};

}  // namespace flopscope::daemon
