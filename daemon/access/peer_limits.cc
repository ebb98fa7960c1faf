// Per-peer bounds on the daemon's shared capacity (peer_limits.h).
#include "daemon/access/peer_limits.h"

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {

PeerLimits::Slot::~Slot() { limits_->Release(*this); }

absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> PeerLimits::AdmitStream(
    const PeerIdentity& caller) {
  // A forwarded stream counts against the total only (its node counted it per uid).
  const bool per_uid = !caller.node_daemon && caller.forwarded_by.empty();
  absl::MutexLock lock(&mu_);
  if (streams_ >= options_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the daemon holds ", streams_, " streams, its most (flopscoped --max-streams): try later"));
  }
  if (per_uid && streams_by_uid_[caller.uid] >= options_.max_streams_per_uid) {
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", caller.uid, " holds ", streams_by_uid_[caller.uid],
                     " streams, the most one user may (flopscoped --max-streams-per-uid)"));
  }
  ++streams_;
  if (per_uid) ++streams_by_uid_[caller.uid];
  return std::unique_ptr<Slot>(new Slot(this, Slot::Kind::kStream, per_uid, caller.uid));
}

absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> PeerLimits::AdmitQuery(
    const PeerIdentity& caller) {
  const bool per_uid = caller.uid != 0;
  absl::MutexLock lock(&mu_);
  if (per_uid && queries_by_uid_[caller.uid] >= options_.max_queries_per_uid) {
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", caller.uid, " has ", queries_by_uid_[caller.uid],
                     " queries in flight, the most one user may (flopscoped "
                     "--max-queries-per-uid): try again when they are answered"));
  }
  if (per_uid) ++queries_by_uid_[caller.uid];
  return std::unique_ptr<Slot>(new Slot(this, Slot::Kind::kQuery, per_uid, caller.uid));
}

void PeerLimits::Release(const Slot& slot) {
  absl::MutexLock lock(&mu_);
  if (slot.kind_ == Slot::Kind::kStream) --streams_;
  if (!slot.per_uid_) return;
  absl::flat_hash_map<uid_t, int>& by_uid =
      slot.kind_ == Slot::Kind::kStream ? streams_by_uid_ : queries_by_uid_;
  if (--by_uid[slot.uid_] <= 0) by_uid.erase(slot.uid_);
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
