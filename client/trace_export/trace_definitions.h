#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// What the records of a trace refer to, collected from the chunks of Query.GetTrace: every
// session's range paths and interned strings (ids are scoped to a rank's session), and the
// module path of each range path as reports print it ("TransformerLM/layers.0/mlp"). Both export
// writers read records through it. Memory: the definitions only, never the records.
class TraceDefinitions {
 public:
  // Takes the chunk's definitions (a session's first chunks carry them).
  void Add(const v1::TraceChunk& chunk);

  struct Path {
    std::string name;
    std::string domain;
    std::string full;  // names from the root joined by '/'
  };
  // The path `path_id` of the chunk's session; nullptr when it was never defined.
  const Path* FindPath(const v1::TraceChunk& chunk, uint64_t path_id) const;
  // The name an activity is shown with: its kernel name, "[memcpy]" or "[memset]".
  std::string ActivityName(const v1::TraceChunk& chunk, const v1::KernelRecord& kernel) const;
  // The module an activity was launched in ("<unattributed>" when none was open).
  std::string ActivityModule(const v1::TraceChunk& chunk, const v1::KernelRecord& kernel) const;

 private:
  // (rank, session index, id)
  struct Key {
    int32_t rank;
    int64_t session;
    uint64_t id;
    friend bool operator==(const Key& a, const Key& b) {
      return a.rank == b.rank && a.session == b.session && a.id == b.id;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.rank, key.session, key.id);
    }
  };
  const std::string& FullPath(const Key& key, int depth);

  absl::flat_hash_map<Key, v1::RangePath> raw_paths_;
  absl::flat_hash_map<Key, Path> paths_;
  absl::flat_hash_map<Key, std::string> strings_;
};

// The id of the flow from range occurrence `instance` of a rank's session to the `ordinal`-th
// activity it launched: unique in the trace (Perfetto's flow ids are global), never 0.
uint64_t FlowId(int32_t rank, int64_t session, uint64_t instance, uint32_t ordinal);

}  // namespace flopscope::client
