#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "injector/kernel_api.h"
#include "injector/kernel_tracing.h"

namespace flopscope::injector::cupti {

// Kernel name -> string id, keyed by CUPTI's name pointer. CUPTI shares one name string among
// all the records of a kernel, so the pointer finds the id without hashing the (often long,
// templated) name, and without the session string table's UTF-8 repair and lock per kernel.
// The cached text is compared before an id is reused, in case CUPTI freed a name with its
// module and reused the address for another.
//
// Thread-safe: one lock per buffer, never across a CUPTI call.
class KernelNameCache {
 public:
  static constexpr size_t kMaxEntries = 1u << 16;  // then the cache starts over

  // Sets name_id on every kernel of `records` (names[i] is the name of records[i]); kernels
  // whose name the session could not intern (table full) are removed and counted in *unnamed.
  void Resolve(std::vector<KernelRecord>* records, const std::vector<const char*>& names,
               TraceSink* sink, uint64_t* unnamed);

 private:
  struct Entry {
    uint32_t id = 0;
    std::string text;
  };
  uint32_t Lookup(const char* name, TraceSink* sink) FS_REQUIRES(mutex_);

  Mutex mutex_;  // guards entries_
  std::unordered_map<const char*, Entry> entries_ FS_GUARDED_BY(mutex_);
};

}  // namespace flopscope::injector::cupti
