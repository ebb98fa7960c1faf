#include "injector/cupti/kernel_name_cache.h"

#include <cstring>

#include "injector/cupti/activity_parser.h"

namespace flopscope::injector::cupti {
namespace {
constexpr const char* kUnnamedKernel = "<unnamed kernel>";
}  // namespace

uint32_t KernelNameCache::Lookup(const char* name, TraceSink* sink) {
  if (name == nullptr) name = kUnnamedKernel;
  auto it = entries_.find(name);
  if (it != entries_.end() && std::strcmp(it->second.text.c_str(), name) == 0) {
    return it->second.id;
  }
  const uint32_t id = sink->InternName(name);
  if (id == 0) return 0;  // the table is full: not cached, so a later attempt may succeed
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[name] = Entry{id, name};
  return id;
}

void KernelNameCache::Resolve(std::vector<KernelRecord>* records,
                              const std::vector<const char*>& names, TraceSink* sink,
                              uint64_t* unnamed) {
  MutexLock lock(&mutex_);  // entries_; the sink's own lock nests inside
  size_t kept = 0;
  for (size_t i = 0; i < records->size(); ++i) {
    KernelRecord& record = (*records)[i];
    if (record.kind == kActivityKernel) {
      record.name_id = Lookup(names[i], sink);
      if (record.name_id == 0) {  // a kernel record needs a name: the daemon would reject it
        ++*unnamed;
        continue;
      }
    }
    if (kept != i) (*records)[kept] = record;
    ++kept;
  }
  records->resize(kept);
}

}  // namespace flopscope::injector::cupti
