#include "daemon/store/disk_space.h"

#include <sys/statvfs.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

constexpr uint64_t kMinReserve = uint64_t{64} << 10;
constexpr uint64_t kMaxReserve = uint64_t{64} << 20;
constexpr uint64_t kReserveDivisor = 20;  // 5 %
// A row costs more in SQLite than in protobuf varints, indexes and the WAL frame headers come on
// top, and the pages a commit touches are written whole into the WAL.
constexpr uint64_t kCommitGrowth = 2;
constexpr uint64_t kCommitPages = 16 * 4096;

}  // namespace

uint64_t DiskSpaceGuard::ReserveFor(uint64_t total_bytes) {
  return std::clamp(total_bytes / kReserveDivisor, kMinReserve, kMaxReserve);
}

uint64_t DiskSpaceGuard::CommitBytesFor(uint64_t encoded_bytes) {
  return kCommitGrowth * encoded_bytes + kCommitPages;
}

absl::Status DiskSpaceGuard::Check(uint64_t incoming_bytes) const {
  struct statvfs info;
  if (statvfs(dir_.c_str(), &info) != 0) return absl::OkStatus();  // SQLite will say, if it is
  const uint64_t unit = info.f_frsize != 0 ? info.f_frsize : info.f_bsize;
  const uint64_t total = static_cast<uint64_t>(info.f_blocks) * unit;
  const uint64_t free_bytes = static_cast<uint64_t>(info.f_bavail) * unit;
  const uint64_t reserve = ReserveFor(total);
  if (free_bytes >= reserve && free_bytes - reserve >= incoming_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      kDiskFullReason, ": ", dir_, " has ", free_bytes >> 10, " KiB free, under the ",
      reserve >> 10, " KiB reserve plus ", incoming_bytes >> 10, " KiB for the write"));
}

bool IsDiskFull(const absl::Status& status) {
  return absl::IsResourceExhausted(status) ||
         absl::StrContains(status.message(), "database or disk is full");
}

absl::Status DiskFullRefusal(const absl::Status& status) {
  if (absl::StartsWith(status.message(), kDiskFullReason)) {
    return absl::ResourceExhaustedError(status.message());
  }
  return absl::ResourceExhaustedError(absl::StrCat(kDiskFullReason, ": ", status.message()));
}

}  // namespace flopscope::daemon
