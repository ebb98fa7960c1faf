#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flopscope/v1/collector.pb.h"

namespace flopscope::transport {

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
// orphan. Not thread-safe: GrpcTransport guards it with its mutex.
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
  // Creates (or replaces) the session's file, locks it and writes the hello. Null with *error.
  static std::unique_ptr<SpoolFile> Create(const std::string& dir, const v1::UpMessage& hello,
                                           uint64_t max_bytes, std::string* error);
  // Opens a file left by an ended process: null when its owner still holds it, or when it is
  // not a spool file of ours (*error says which; empty for "still owned").
  static std::unique_ptr<SpoolFile> OpenOrphan(const std::string& path, std::string* error);
  // The same for flopscoped's collector of orphaned spools (daemon/spool_collector.h): a file
  // of any owner, whose uid is returned in *owner for the daemon's access check.
  static std::unique_ptr<SpoolFile> OpenOrphanOfAnyOwner(const std::string& path, uid_t* owner,
                                                         std::string* error);
  // Spool files in `dir`, sorted by name.
  static std::vector<std::string> List(const std::string& dir);

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
  // Deletes the file.
  void Remove();

  const v1::UpMessage& hello() const { return hello_; }
  // For an orphan: its batches by increasing seq, one per seq.
  const std::vector<Entry>& entries() const { return entries_; }
  const std::string& path() const { return path_; }
  uint64_t bytes() const { return end_; }

 private:
  SpoolFile(int fd, std::string path, uint64_t max_bytes);
  bool WriteFrame(uint64_t seq, uint64_t records, const std::string& payload, Entry* entry);
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

}  // namespace flopscope::transport
