#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flopscope/v1/collector.pb.h"

namespace flopscope {

// A session's spool: the batches the daemon has not acknowledged yet, on local disk, so that
// they reach the store later — sent by this process when its connection comes back, or, after
// it ended, by the next injected process of the same user that reaches the daemon.
//
// The file is `<dir>/<session>.spool` (0600 in a 0700 directory of our uid): an 8-byte magic,
// then frames of {u32 payload length, u64 seq, u64 records, payload}, where the first frame is
// the hello (seq 0) and the others are encoded UpMessage batches in any seq order (a seq may
// appear twice; the later frame wins). A frame cut short by a crash ends the file.
//
// The owner holds flock(LOCK_EX) on it for its whole life; a file whose lock can be taken is an
// orphan. The transport writes every batch here before sending it (a write-ahead log: the page
// cache keeps it through SIGKILL), so the file may also hold batches the daemon acknowledged;
// readers skip those by the daemon's committed seq. Compact() rewrites the unacknowledged frames
// into `<file>.new` and renames it over the file; an opener that finds its inode replaced
// after taking the lock gives it up (that inode is no longer the session's spool).
// Not thread-safe: GrpcTransport guards it with its mutex.
class SpoolFile {
 public:
  struct Entry {
    uint64_t seq = 0;
    uint64_t offset = 0;  // of the payload
    uint32_t length = 0;
    uint64_t records = 0;
  };
  static constexpr const char* kSuffix = ".spool";

  // Makes sure `dir` is a directory of ours with mode 0700 (created if absent); false with the
  // reason otherwise (another user's or a group/world-accessible directory is never used).
  static bool PrepareDirectory(const std::string& dir, std::string* error);
  // Creates (or replaces) the session's file, locked and holding the hello from the moment its
  // name appears (written as a copy, then renamed). Null with *error.
  static std::unique_ptr<SpoolFile> Create(const std::string& dir, const v1::UpMessage& hello,
                                           uint64_t max_bytes, std::string* error);
  // Opens a file left by an ended process: null when its owner still holds it, or when it is
  // not a spool file of ours (*error says which; empty for "still owned").
  static std::unique_ptr<SpoolFile> OpenOrphan(const std::string& path, std::string* error);
  // The same for flopscoped's collector of orphaned spools (daemon/ingest/spool_collector.h): a
  // file of any owner, whose uid is returned in *owner for the daemon's access check.
  static std::unique_ptr<SpoolFile> OpenOrphanOfAnyOwner(const std::string& path, uid_t* owner,
                                                         std::string* error);
  // Spool files in `dir`, sorted by name.
  static std::vector<std::string> List(const std::string& dir);
  // Removes the `*.spool.new` copies in `dir` that a compaction left when its process died (a
  // copy whose lock is free); returns how many. The file they were copied from is intact.
  static size_t RemoveAbandonedCopies(const std::string& dir);
  static constexpr const char* kCopySuffix = ".new";
  // Removes `path` when it is a regular file of `owner` and an orphan that holds no record:
  // empty, or cut within its magic, and last written at least `min_age_s` seconds ago. Such a
  // file comes only from an injector older than the rename in Create, whose process ended
  // between creating the file and writing its magic; the age keeps a live old injector's file
  // (created, not locked yet) safe. True when it was removed.
  static bool RemoveEmptyOrphan(const std::string& path, uid_t owner, int64_t min_age_s);
  // Bytes a frame of `payload_length` takes in the file.
  static constexpr uint64_t FrameBytes(uint32_t payload_length) { return 20 + payload_length; }

  ~SpoolFile();  // closes (and so unlocks) the file; keeps it on disk unless Remove() was called
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;

  // Appends one batch; false (nothing written) when it would take the file over max_bytes or the
  // write failed.
  bool Append(uint64_t seq, const v1::UpMessage& batch, uint64_t records, Entry* entry);
  // The same for the small batches a process writes last (definitions, loss figures): they may
  // take the file up to kExitSlack bytes over max_bytes, so that a full spool still records what
  // was lost and what its other batches need.
  static constexpr uint64_t kExitSlack = 1 << 20;
  bool AppendLast(uint64_t seq, const v1::UpMessage& batch);
  bool Read(const Entry& entry, v1::UpMessage* out) const;
  // Forgets every batch (all acknowledged): the file shrinks back to its hello.
  void Reset();
  // Rewrites the file with its hello and the frames `live` points at (in that order), then
  // updates their offsets; every other frame is dropped. Atomic for a reader: the copy is
  // written beside the file and renamed over it. False (the file unchanged) when that fails.
  bool Compact(const std::vector<Entry*>& live);
  // Deletes the file.
  void Remove();

  const v1::UpMessage& hello() const { return hello_; }
  // For an orphan: its batches by increasing seq, one per seq.
  const std::vector<Entry>& entries() const { return entries_; }
  const std::string& path() const { return path_; }
  uint64_t bytes() const { return end_; }
  // What the file takes with no batch in it (magic and hello).
  uint64_t empty_bytes() const { return hello_end_; }

 private:
  static constexpr int kCreateAttempts = 5;
  static constexpr useconds_t kCreateRetryMicros = 2000;

  SpoolFile(int fd, std::string path, uint64_t max_bytes);
  // One try of Create at `path`; *retry when another process held or removed the copy.
  static std::unique_ptr<SpoolFile> CreateOnce(const std::string& path, const v1::UpMessage& hello,
                                               uint64_t max_bytes, bool* retry, std::string* error);
  // Writes one frame at end_ and advances it; the message is serialised straight into the file
  // (no copy of the batch in memory).
  bool WriteFrame(uint64_t seq, uint64_t records, const v1::UpMessage& message, Entry* entry);
  // Writes the magic, the hello and the frames `live` points at into the file `fd`, with their
  // new places in *moved; false on any I/O failure.
  bool CopyFrames(int fd, const std::vector<Entry*>& live, std::vector<Entry>* moved) const;
  // Reads the frames of an existing file into hello_ and entries_.
  bool Scan(std::string* error);

  int fd_;
  std::string path_;
  const uint64_t max_bytes_;
  uint64_t end_ = 0;        // where the next frame goes
  uint64_t hello_end_ = 0;  // Reset truncates to this
  v1::UpMessage hello_;
  std::vector<Entry> entries_;
  bool removed_ = false;
};

}  // namespace flopscope
