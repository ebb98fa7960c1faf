#pragma once

// Counts of records made, per recording thread, kept in a memory-mapped file so that they
// outlive the process: the page cache keeps a MAP_SHARED file's pages through SIGKILL. A thread
// buffer adds one to its own slot as it accepts a record; after the process is gone, whoever
// collects its orphaned spool sums the slots (ParseMadeCounts) and so knows how many records the
// session made, including those still in thread buffers at the kill.
//
// Layout (host byte order: written and read on the same node), exactly kFileBytes long:
//   header, 64 bytes: the 8-byte magic "FSMADE02", u32 slot count (kSlots), u32 length of the
//   encoded session (at most kSessionBytes; 0: none), u32 end signal (0, or SIGINT / SIGTERM
//   once the injector began draining for that signal: NameEndSignal), zeros;
//   kSlots slots of 64 bytes each (one cache line: no two writers share a line), a u64 count at
//   the start of each, zeros after it;
//   kSessionBytes for the session that made the records (MadeSession, written once at creation,
//   before the magic): i32 rank, local_rank, world_size; u32 tp_size, pp_size, dp_size, tp_rank,
//   pp_rank, dp_rank; i64 pid, start_time_ns; then six strings, each a u32 length and its bytes:
//   session_id, job_id, host, injector_version, layout_source, command; zeros after it. With it a
//   collector can charge what the file counts to its session even when the process died before
//   its spool (and the hello in it) existed.
// The end signal tells a collector that a session which never delivered its final batch was
// ended by Ctrl-C or SIGTERM and its drain cut short (injector/sigterm_drain.h: its bound ran
// out, or the transport had not started), not killed: it is written when the drain begins, so
// it outlives a drain that never finishes. A collector older than it refuses a file that names
// one (bytes where its header had none) and leaves it, logged.
// Slot 0 is shared (an atomic add) by the threads that find every other slot taken; each other
// slot has one writer at a time, which adds with a relaxed load and store of its own line, no
// atomic read-modify-write. A slot freed by an exiting thread keeps its count: the next owner
// adds to it.
//
// The file is `<spool dir>/<session>.made` (common/spool_dir.h), beside the session's spool.
// Its writer holds flock(LOCK_EX) on it for its whole life, as on the spool file: a file whose
// lock can be taken was left by a process that is gone (ReadOrphan).
//
// Dependency-free (the injector links it): no Abseil.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace flopscope {

// The session whose records a made-counts file counts: what a collector needs to open that
// session in the store (the fields of its hello that the injector knows before its transport
// starts). Strings are cut to fit kSessionBytes when the file is made (the command first).
struct MadeSession {
  std::string session_id, job_id, host, injector_version, layout_source, command;
  int32_t rank = 0, local_rank = 0, world_size = 1;
  uint32_t tp_size = 1, pp_size = 1, dp_size = 1, tp_rank = 0, pp_rank = 0, dp_rank = 0;
  int64_t pid = 0, start_time_ns = 0;
  // Not part of the encoded session: the header's end signal (0: none; SIGINT or SIGTERM), read
  // back by ParseMadeCounts whether the file names a session or not.
  int32_t end_signal = 0;
  bool known() const { return !session_id.empty(); }
};

class MadeCountsPage {
 public:
  static constexpr char kMagic[8] = {'F', 'S', 'M', 'A', 'D', 'E', '0', '2'};
  static constexpr size_t kLineBytes = 64;
  static constexpr uint32_t kSlots = 1023;  // with the header, 64 KiB
  static constexpr size_t kSessionBytes = 8192;
  static constexpr size_t kFileBytes = kLineBytes * (kSlots + 1) + kSessionBytes;
  static constexpr const char* kSuffix = ".made";

  // One writer's counter. Add() is the hot path: for an own slot one relaxed load and store.
  class Counter {
   public:
    Counter() = default;
    void Add(uint64_t records) {
      if (count_ == nullptr) return;  // no page (counting off)
      if (shared_) {
        count_->fetch_add(records, std::memory_order_relaxed);
      } else {
        count_->store(count_->load(std::memory_order_relaxed) + records, std::memory_order_relaxed);
      }
    }
    bool shared() const { return shared_; }

   private:
    friend class MadeCountsPage;
    Counter(std::atomic<uint64_t>* count, uint32_t slot, bool shared)
        : count_(count), slot_(slot), shared_(shared) {}
    std::atomic<uint64_t>* count_ = nullptr;
    uint32_t slot_ = 0;
    bool shared_ = false;
  };

  // Creates `path` (it must not exist; mode 0600), locks, sizes and maps it, naming `session`
  // (none: a file that names no session). nullptr, with *error saying why, when that fails.
  static std::unique_ptr<MadeCountsPage> Create(const std::string& path, std::string* error);
  static std::unique_ptr<MadeCountsPage> Create(const std::string& path, const MadeSession& session,
                                                std::string* error);
  MadeCountsPage(const MadeCountsPage&) = delete;
  MadeCountsPage& operator=(const MadeCountsPage&) = delete;
  ~MadeCountsPage();  // unmaps and unlocks; the file stays unless Remove() was called
  // Deletes the file (a clean exit: every record made is delivered, spooled or counted).
  void Remove();
  // Writes the end signal into the header (SIGINT or SIGTERM; anything else is ignored): one
  // relaxed store to the mapped page, async-signal-safe; the first one written stays.
  void NameEndSignal(int signo);

  // Reads a file left by a process that is gone (its lock free): true with *total, the *session
  // it names (cleared when none) and its *owner uid. False when the owner still holds it
  // (*error empty) or it is not a made-counts file (*error says why). The file is read as
  // untrusted bytes, bounded to kFileBytes.
  static bool ReadOrphan(const std::string& path, uid_t* owner, uint64_t* total,
                         MadeSession* session, std::string* error);

  // A counter for the calling writer: a free slot of its own, or the shared slot 0 when every
  // other one is taken. Give it back with Release when the writer is done.
  Counter Acquire();
  void Release(const Counter& counter);

  // The sum of every slot now (for tests and the exit line; the collector reads the file).
  uint64_t Total() const;
  const std::string& path() const { return path_; }

 private:
  MadeCountsPage(std::string path, int fd, char* map);
  std::atomic<uint64_t>* SlotCount(uint32_t slot) const;
  std::atomic<uint32_t>* EndSignal() const;

  const std::string path_;
  const int fd_;  // held open for its lock
  char* const map_;
  Mutex mutex_;  // taken only when a writer starts or ends
  std::vector<uint32_t> free_ FS_GUARDED_BY(mutex_);
};

// Reads a made-counts file's bytes (untrusted: the collector reads files other users wrote).
// True with *total the sum of the slots and *session the session it names (cleared when none;
// its end_signal set either way) when `data` is exactly such a file; false with *error naming
// what is wrong otherwise (wrong size or magic, an end signal other than SIGINT or SIGTERM, a sum
// past 2^64, non-zero padding, a session field past its area or its end).
// The session's strings are bytes as written: the caller validates them as it would a hello.
bool ParseMadeCounts(const char* data, size_t size, uint64_t* total, MadeSession* session,
                     std::string* error);

// `session` in the file's encoding, its strings cut (at UTF-8 boundaries) so that the whole
// fits in MadeCountsPage::kSessionBytes: the command gives way first. For tests and seeds too.
std::string EncodeMadeSession(const MadeSession& session);

}  // namespace flopscope
