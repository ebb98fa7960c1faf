// Range paths and strings of a streamed trace (see trace_definitions.h).
#include "client/trace_export/trace_definitions.h"

namespace flopscope::client {
namespace {

constexpr int kMaxDepth = 256;  // a cycle of parent ids in a damaged file stops here

}  // namespace

void TraceDefinitions::Add(const v1::TraceChunk& chunk) {
  for (const v1::RangePath& path : chunk.paths()) {
    raw_paths_[{chunk.rank(), chunk.session_index(), path.id()}] = path;
  }
  for (const v1::RangePath& path : chunk.paths()) {
    FullPath({chunk.rank(), chunk.session_index(), path.id()}, 0);
  }
  for (const v1::StringDef& def : chunk.strings()) {
    strings_[{chunk.rank(), chunk.session_index(), def.id()}] = def.value();
  }
}

const std::string& TraceDefinitions::FullPath(const Key& key, int depth) {
  static const std::string kNone;
  if (auto done = paths_.find(key); done != paths_.end()) return done->second.full;
  auto raw = raw_paths_.find(key);
  if (raw == raw_paths_.end() || depth > kMaxDepth) return kNone;
  const v1::RangePath& path = raw->second;
  std::string full = path.name();
  if (path.parent_id() != 0) {
    const std::string& parent = FullPath({key.rank, key.session, path.parent_id()}, depth + 1);
    if (!parent.empty()) full = parent + "/" + full;
  }
  Path& entry = paths_[key];
  entry = Path{path.name(), path.domain(), std::move(full)};
  return entry.full;
}

const TraceDefinitions::Path* TraceDefinitions::FindPath(const v1::TraceChunk& chunk,
                                                         uint64_t path_id) const {
  auto it = paths_.find(Key{chunk.rank(), chunk.session_index(), path_id});
  return it == paths_.end() ? nullptr : &it->second;
}

std::string TraceDefinitions::ActivityName(const v1::TraceChunk& chunk,
                                           const v1::KernelRecord& kernel) const {
  if (kernel.kind() == v1::ACTIVITY_KIND_MEMCPY) return "[memcpy]";
  if (kernel.kind() == v1::ACTIVITY_KIND_MEMSET) return "[memset]";
  auto it = strings_.find(Key{chunk.rank(), chunk.session_index(), kernel.name_id()});
  return it == strings_.end() ? "[kernel]" : it->second;
}

std::string TraceDefinitions::ActivityModule(const v1::TraceChunk& chunk,
                                             const v1::KernelRecord& kernel) const {
  const Path* path = kernel.path_id() == 0 ? nullptr : FindPath(chunk, kernel.path_id());
  return path == nullptr ? "<unattributed>" : path->full;
}

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t FlowId(int32_t rank, int64_t session, uint64_t instance, uint32_t ordinal) {
  // Distinct inputs collide with probability ~2^-64 per pair.
  const uint64_t x = Mix(Mix(Mix(static_cast<uint32_t>(rank) ^ (uint64_t{ordinal} << 32)) ^
                             static_cast<uint64_t>(session)) ^
                         instance);
  return x == 0 ? 1 : x;
}

}  // namespace flopscope::client
