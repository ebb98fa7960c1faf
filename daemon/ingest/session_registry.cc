#include "daemon/ingest/session_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

std::string Describe(const SessionKey& key) {
  return absl::StrCat("job ", key.job_id, " rank ", key.rank, " session ", key.session_id);
}

}  // namespace

bool LiveSession::Write(const v1::DownMessage& message) {
  absl::MutexLock lock(&write_mu_);  // one Write in flight per stream (see write_mu_)
  return writer_ && writer_(message);
}

void LiveSession::Close() {
  absl::MutexLock lock(&write_mu_);  // waits for a Write in progress on another thread
  writer_ = nullptr;
}

void PendingControl::Resolve(absl::StatusOr<v1::ControlReply> outcome) {
  absl::MutexLock lock(&mu_);
  if (!outcome_.has_value()) outcome_ = std::move(outcome);
}

std::optional<absl::StatusOr<v1::ControlReply>> PendingControl::WaitUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](std::optional<absl::StatusOr<v1::ControlReply>>* outcome) {
                              return outcome->has_value();
                            },
                            &outcome_),
                        deadline);
  return outcome_;
}

std::shared_ptr<LiveSession> SessionRegistry::Register(SessionKey key, DownWriter writer) {
  auto session = std::make_shared<LiveSession>(key, std::move(writer));
  absl::MutexLock lock(&mu_);
  sessions_[std::move(key)] = session;
  return session;
}

void SessionRegistry::Unregister(const std::shared_ptr<LiveSession>& session) {
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session->key());
    // A newer stream of the same session may have taken the key: that one stays listed.
    if (it != sessions_.end() && it->second == session) sessions_.erase(it);
  }
  // Outside the registry's lock: Close may wait for a slow Write on this stream.
  session->Close();
  std::vector<std::shared_ptr<PendingControl>> orphans;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second->stream() == session.get()) {
        orphans.push_back(std::move(it->second));
        pending_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const std::shared_ptr<PendingControl>& control : orphans) {
    control->Resolve(absl::UnavailableError("the stream ended before the process replied"));
  }
}

std::vector<SessionKey> SessionRegistry::SessionsOf(absl::string_view job_id) const {
  std::vector<SessionKey> keys;
  absl::MutexLock lock(&mu_);
  // Keys sort by job first, so the job's sessions are one run starting at its lower bound.
  for (auto it = sessions_.lower_bound(SessionKey{std::string(job_id), INT32_MIN, ""});
       it != sessions_.end() && it->first.job_id == job_id; ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

std::vector<SessionKey> SessionRegistry::Sessions() const {
  std::vector<SessionKey> keys;
  absl::MutexLock lock(&mu_);
  keys.reserve(sessions_.size());
  for (const auto& [key, session] : sessions_) keys.push_back(key);
  return keys;
}

bool SessionRegistry::IsLive(const SessionKey& key) const {
  absl::MutexLock lock(&mu_);
  return sessions_.contains(key);
}

size_t SessionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

size_t SessionRegistry::pending_controls() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::StatusOr<std::shared_ptr<PendingControl>> SessionRegistry::Send(const SessionKey& session,
                                                                      v1::Control control) {
  std::shared_ptr<LiveSession> stream;
  std::shared_ptr<PendingControl> pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat(Describe(session), " is not connected"));
    }
    stream = it->second;
    pending = std::make_shared<PendingControl>(next_control_id_++, stream.get());
    // Listed before the write: the reply may be read before Write returns.
    pending_[pending->id()] = pending;
  }
  control.set_id(pending->id());
  v1::DownMessage message;
  *message.mutable_control() = std::move(control);
  if (!stream->Write(message)) {
    TakePending(pending->id());
    return absl::UnavailableError("the stream ended before the request could be sent");
  }
  return pending;
}

absl::StatusOr<v1::ControlReply> SessionRegistry::AwaitReply(
    const std::shared_ptr<PendingControl>& pending, absl::Time deadline) {
  if (auto outcome = pending->WaitUntil(deadline)) return *std::move(outcome);
  TakePending(pending->id());
  // A reply may have slipped in between the deadline and the removal: it still counts.
  if (auto outcome = pending->WaitUntil(absl::InfinitePast())) return *std::move(outcome);
  return absl::DeadlineExceededError("no reply before the deadline");
}

bool SessionRegistry::DeliverReply(const LiveSession& from, const v1::ControlReply& reply) {
  std::shared_ptr<PendingControl> pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(reply.id());
    // Streams are untrusted: one may only answer what was sent down it.
    if (it == pending_.end() || it->second->stream() != &from) return false;
    pending = std::move(it->second);
    pending_.erase(it);
  }
  pending->Resolve(reply);
  return true;
}

std::shared_ptr<PendingControl> SessionRegistry::TakePending(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return nullptr;
  std::shared_ptr<PendingControl> pending = std::move(it->second);
  pending_.erase(it);
  return pending;
}

}  // namespace flopscope::daemon
