#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace flopscope::daemon {

// The start of every refusal for lack of space: the injector shows it as the reason its records
// wait (or spool), and tests look for it.
inline constexpr char kDiskFullReason[] = "daemon disk full";

// Keeps the data directory's file system from filling up under the rank files: a batch or a new
// session is refused while the free space is under a reserve (5 % of the file system, at least
// 64 KiB, at most 64 MiB), which is left to the catalog's small updates and to SQLite's journal
// of a commit already under way. So a full disk stops rank files at a batch boundary and the
// catalog still records what they hold.
//
// Thread-safe: immutable after construction; Check() is one statvfs(2).
class DiskSpaceGuard {
 public:
  explicit DiskSpaceGuard(std::string dir) : dir_(std::move(dir)) {}

  // RESOURCE_EXHAUSTED "daemon disk full: <dir> has N KiB free, under the M KiB reserve" when
  // the free space less `incoming_bytes` (what the write about to happen may take, WAL
  // included) is under the reserve; OK otherwise, and when the file system cannot be asked.
  absl::Status Check(uint64_t incoming_bytes = 0) const;

  // What committing a batch of `encoded_bytes` (its protobuf size) may add to a rank file and
  // its WAL, rows and indexes together: a generous multiple.
  static uint64_t CommitBytesFor(uint64_t encoded_bytes);

  // The reserve for a file system of `total_bytes`.
  static uint64_t ReserveFor(uint64_t total_bytes);

 private:
  const std::string dir_;
};

// Whether `status` says the disk is full: RESOURCE_EXHAUSTED from SQLite (SQLITE_FULL) or from
// DiskSpaceGuard.
bool IsDiskFull(const absl::Status& status);

// `status` as the refusal a producer sees: RESOURCE_EXHAUSTED whose message starts with
// kDiskFullReason.
absl::Status DiskFullRefusal(const absl::Status& status);

}  // namespace flopscope::daemon
