#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace flopscope::injector {

// A fixed block of records. Threads fill chunks and the exporter empties them; recycling them
// through a pool keeps their pages warm, so the hot path never pays for page faults or vector
// reallocation (profiling showed both costing more than the rest of a push/pop together).
template <typename T, size_t N>
struct RecordChunk {
  static constexpr size_t kCapacity = N;
  size_t count = 0;
  T records[N];

  bool full() const { return count == kCapacity; }
};

// Empty chunks waiting for reuse, and the session-wide memory bound they count against.
// `charge`/`refund` account real allocations; chunks in the pool stay charged.
template <typename Chunk>
class ChunkPool {
 public:
  // At most this many idle chunks are kept; more are freed (and refunded).
  static constexpr size_t kMaxIdle = 32;

  template <typename Charge>
  Chunk* Acquire(Charge try_charge) {
    {
      // Taken once per chunk (thousands of records), not per record.
      MutexLock lock(&mutex_);
      if (!idle_.empty()) {
        Chunk* chunk = idle_.back();
        idle_.pop_back();
        return chunk;
      }
    }
    if (!try_charge(sizeof(Chunk))) return nullptr;
    return new Chunk();
  }

  // Returns the chunks (emptied); reports the bytes freed beyond the idle limit.
  template <typename Refund>
  void Release(std::vector<Chunk*>* chunks, Refund refund) {
    std::vector<Chunk*> surplus;
    {
      MutexLock lock(&mutex_);
      for (Chunk* chunk : *chunks) {
        chunk->count = 0;
        if (idle_.size() < kMaxIdle) {
          idle_.push_back(chunk);
        } else {
          surplus.push_back(chunk);
        }
      }
    }
    chunks->clear();
    for (Chunk* chunk : surplus) {
      delete chunk;
      refund(sizeof(Chunk));
    }
  }

 private:
  Mutex mutex_;  // see Acquire
  std::vector<Chunk*> idle_ FS_GUARDED_BY(mutex_);
};

}  // namespace flopscope::injector
