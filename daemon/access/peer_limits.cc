// Per-peer bounds on the daemon's shared capacity (peer_limits.h).
#include "daemon/access/peer_limits.h"

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {

PeerLimits::StreamSlot::~StreamSlot() { limits_->Release(per_uid_, uid_); }

absl::StatusOr<std::unique_ptr<PeerLimits::StreamSlot>> PeerLimits::AdmitStream(
    const PeerIdentity& caller) {
  // A forwarded stream counts against the total only (its node counted it per uid).
  const bool per_uid = !caller.node_daemon && caller.forwarded_by.empty();
  absl::MutexLock lock(&mu_);
  if (streams_ >= options_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the daemon holds ", streams_, " streams, its most (flopscoped --max-threads): try later"));
  }
  if (per_uid && streams_by_uid_[caller.uid] >= options_.max_streams_per_uid) {
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", caller.uid, " holds ", streams_by_uid_[caller.uid],
                     " streams, the most one user may (flopscoped --max-streams-per-uid)"));
  }
  ++streams_;
  if (per_uid) ++streams_by_uid_[caller.uid];
  return std::unique_ptr<StreamSlot>(new StreamSlot(this, per_uid, caller.uid));
}

void PeerLimits::Release(bool per_uid, uid_t uid) {
  absl::MutexLock lock(&mu_);
  --streams_;
  if (!per_uid) return;
  if (--streams_by_uid_[uid] <= 0) streams_by_uid_.erase(uid);
}

absl::Status PeerLimits::AdmitNewJob(uid_t uid, absl::Time now) {
  if (uid == 0 || options_.max_new_jobs_per_minute <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  JobWindow& window = new_jobs_[uid];
  if (now - window.start >= absl::Minutes(1)) window = JobWindow{now, 0};
  if (window.created >= options_.max_new_jobs_per_minute) {
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", uid, " created ", window.created,
                     " jobs in the last minute, the most one user may "
                     "(flopscoped --max-new-jobs-per-minute): try again in a minute"));
  }
  ++window.created;
  return absl::OkStatus();
}

int PeerLimits::streams() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

}  // namespace flopscope::daemon
