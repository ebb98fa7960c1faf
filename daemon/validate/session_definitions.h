#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// A range path as the validator needs to remember it: where it hangs, how deep, and a digest of
// its content to recognise a redefinition with different content.
struct PathDefinition {
  uint64_t parent_id = 0;
  uint32_t depth = 0;  // 1 for a child of the root
  size_t content_digest = 0;
};

// The range paths and interned strings one session has defined so far. Digests instead of the
// text keep a session with many long kernel names small in memory. Digests are process-local
// (absl::Hash is seeded per process): rebuild from the database after a restart, never persist.
//
// Not thread-safe; RankStore guards the instances it holds with its mutex.
class SessionDefinitions {
 public:
  const PathDefinition* FindPath(uint64_t id) const;
  // The digest of string `id`, or nullptr when undefined.
  const size_t* FindString(uint32_t id) const;

  // `parent_depth` is 0 for a child of the root.
  void AddPath(uint64_t id, uint64_t parent_id, uint32_t parent_depth, absl::string_view domain,
               absl::string_view name);
  void AddString(uint32_t id, absl::string_view value);
  // Takes over everything `other` defines (after the batch defining it was committed).
  void Merge(const SessionDefinitions& other);
  void Clear();

  size_t path_count() const { return paths_.size(); }
  size_t string_count() const { return strings_.size(); }
  const absl::flat_hash_map<uint64_t, PathDefinition>& paths() const { return paths_; }

  static size_t PathDigest(uint64_t parent_id, absl::string_view domain, absl::string_view name);
  static size_t StringDigest(absl::string_view value);

 private:
  absl::flat_hash_map<uint64_t, PathDefinition> paths_;
  absl::flat_hash_map<uint32_t, size_t> strings_;
};

}  // namespace flopscope::daemon
