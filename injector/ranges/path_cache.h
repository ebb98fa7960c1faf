#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace flopscope::injector {

// A thread's private memo of PathTable lookups, so a push normally costs a hash lookup instead
// of the global mutex. Keyed by the raw (unsanitized) name the application passed.
class PathCache {
 public:
  // Past this many entries the cache starts over (the global table still has everything).
  static constexpr size_t kMaxEntries = 1 << 16;

  // 0 when absent.
  uint64_t Find(uint64_t parent_id, uint32_t domain_id, std::string_view name) const {
    auto it = map_.find(KeyView{parent_id, domain_id, name});
    return it == map_.end() ? 0 : it->second;
  }

  void Insert(uint64_t parent_id, uint32_t domain_id, std::string_view name, uint64_t path_id) {
    if (map_.size() >= kMaxEntries) map_.clear();
    map_.emplace(Key{parent_id, domain_id, std::string(name)}, path_id);
  }

  size_t size() const { return map_.size(); }

 private:
  struct Key {
    uint64_t parent_id;
    uint32_t domain_id;
    std::string name;
  };
  struct KeyView {
    uint64_t parent_id;
    uint32_t domain_id;
    std::string_view name;
  };
  static KeyView View(const Key& key) { return {key.parent_id, key.domain_id, key.name}; }
  static const KeyView& View(const KeyView& key) { return key; }

  // Transparent hash and equality: lookups take a string_view and allocate nothing.
  struct Hash {
    using is_transparent = void;
    template <typename K>
    size_t operator()(const K& key) const {
      const KeyView& view = View(key);
      const size_t name_hash = std::hash<std::string_view>()(view.name);
      return name_hash ^ ((view.parent_id * 0x9E3779B97F4A7C15ULL) + view.domain_id);
    }
  };
  struct Equal {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const KeyView& x = View(a);
      const KeyView& y = View(b);
      return x.parent_id == y.parent_id && x.domain_id == y.domain_id && x.name == y.name;
    }
  };

  std::unordered_map<Key, uint64_t, Hash, Equal> map_;
};

}  // namespace flopscope::injector
