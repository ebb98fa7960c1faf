#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "injector/ranges/domain_registry.h"

namespace flopscope::injector {

// One node of the range tree (flopscope.v1.RangePath).
struct PathDefinition {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  const Domain* domain = nullptr;
  std::string name;  // valid UTF-8, at most kMaxNameBytes
};

// Interns range paths for the whole process: (parent id, domain, name) -> id, ids from 1 in
// creation order. Each new path is queued once for export; the exporter takes the queue AFTER
// draining the record buffers, so every record it sends has its path defined in the same or an
// earlier batch. Definitions are never dropped.
class PathTable {
 public:
  static constexpr size_t kDefaultMaxPaths = 1000000;
  static constexpr size_t kMaxNameBytes = 1024;

  explicit PathTable(size_t max_paths = kDefaultMaxPaths) : max_paths_(max_paths) {}
  PathTable(const PathTable&) = delete;
  PathTable& operator=(const PathTable&) = delete;

  // Returns the path's id, or 0 when the table is full (the caller counts TOO_MANY_PATHS). The
  // name may be any bytes: it is repaired to UTF-8 and truncated before it is stored.
  uint64_t Intern(uint64_t parent_id, const Domain* domain, std::string_view raw_name)
      FS_EXCLUDES(mutex_);

  // Moves the definitions created since the last call into *out (appending).
  void TakeNewDefinitions(std::vector<PathDefinition>* out);

  size_t size() const;

 private:
  const size_t max_paths_;
  // Guards everything below. Taken on a per-thread cache miss only (see RangeTracker), so the
  // push/pop hot path normally never touches it.
  mutable Mutex mutex_;
  std::unordered_map<std::string, uint64_t> ids_ FS_GUARDED_BY(mutex_);
  std::vector<PathDefinition> unexported_ FS_GUARDED_BY(mutex_);
  uint64_t next_id_ FS_GUARDED_BY(mutex_) = 1;
};

}  // namespace flopscope::injector
