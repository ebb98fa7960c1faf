#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "flopscope/v1/collector.pb.h"

namespace flopscope::daemon {

// Who is at the other end of a live collector stream.
struct SessionKey {
  std::string job_id;
  int32_t rank = 0;
  std::string session_id;

  auto operator<=>(const SessionKey&) const = default;
};

// Writes one DownMessage on a stream; false once the stream is broken.
using DownWriter = std::function<bool(const v1::DownMessage&)>;

// One live collector stream as its handler and the registry share it. Every write on the stream
// after the Welcome goes through Write(), so the handler's Acks and the Profiling service's
// Controls never overlap.
class LiveSession {
 public:
  LiveSession(SessionKey key, DownWriter writer)
      : key_(std::move(key)), writer_(std::move(writer)) {}

  const SessionKey& key() const { return key_; }

  // False when the stream is closed or the write failed.
  bool Write(const v1::DownMessage& message) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Nothing is written after this returns; a write in progress finishes first. The handler must
  // close before it returns, since gRPC destroys the stream then.
  void Close() ABSL_LOCKS_EXCLUDED(write_mu_);

 private:
  const SessionKey key_;
  // The handler's Acks (from an ingest worker) and the Profiling threads' Controls take turns
  // here, and Close waits for a write in progress. Held across the writer: the Collector's
  // (collector_service.cc) only queues the message for the stream's one write in flight and
  // takes its reactor's lock, which is never held across a call out, so this is short; another
  // writer may block for as long as it writes, so this is never taken under the registry's lock.
  absl::Mutex write_mu_;
  DownWriter writer_ ABSL_GUARDED_BY(write_mu_);  // empty once closed
};

// The reply to one Control, filled in by the stream it went down when its reply is read.
class PendingControl {
 public:
  PendingControl(uint64_t id, const LiveSession* stream) : id_(id), stream_(stream) {}

  uint64_t id() const { return id_; }
  // Identity only (never dereferenced): which stream may answer.
  const LiveSession* stream() const { return stream_; }

  // The first outcome wins; later ones are ignored.
  void Resolve(absl::StatusOr<v1::ControlReply> outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // The outcome once there is one, or nullopt when `deadline` passes first.
  std::optional<absl::StatusOr<v1::ControlReply>> WaitUntil(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const uint64_t id_;
  const LiveSession* const stream_;
  absl::Mutex mu_;  // the waiting thread and the stream's reading reaction meet here
  std::optional<absl::StatusOr<v1::ControlReply>> outcome_ ABSL_GUARDED_BY(mu_);
};

// The live collector streams of this daemon by (job, rank, session), and the Controls sent down
// them that still wait for a ControlReply. CollectorService registers a stream after its Welcome
// and unregisters it when the stream ends; ProfilingService sends Controls and awaits replies.
//
// Thread-safe. The registry's lock guards only its maps; it is never held across a stream Write
// (a slow client would stall every other stream) nor while waiting for a reply.
class SessionRegistry {
 public:
  // Lists a stream whose Welcome went out. A stream with the same key replaces the listed one (a
  // reconnect whose old stream has not noticed its end yet); the old one can still unregister.
  std::shared_ptr<LiveSession> Register(SessionKey key, DownWriter writer) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream is ending: it is delisted, closed for writes (waiting for a write in progress) and
  // every Control still waiting for its reply fails with UNAVAILABLE.
  void Unregister(const std::shared_ptr<LiveSession>& session) ABSL_LOCKS_EXCLUDED(mu_);

  // The live sessions of `job_id`, by rank then session id.
  std::vector<SessionKey> SessionsOf(absl::string_view job_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every live session, in key order (a node daemon's forwarder keeps a stream upstream for each).
  std::vector<SessionKey> Sessions() const ABSL_LOCKS_EXCLUDED(mu_);
  bool IsLive(const SessionKey& key) const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // Gives `control` a daemon-wide unique id and writes it on the session's stream as a
  // DownMessage. NOT_FOUND when the session is not live, UNAVAILABLE when its stream ended before
  // the write.
  absl::StatusOr<std::shared_ptr<PendingControl>> Send(const SessionKey& session,
                                                       v1::Control control)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the reply to `pending` arrives or its stream ends (UNAVAILABLE), or until
  // `deadline` (DEADLINE_EXCEEDED; the control is forgotten and a late reply is dropped).
  absl::StatusOr<v1::ControlReply> AwaitReply(const std::shared_ptr<PendingControl>& pending,
                                              absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // A ControlReply read on `from`'s stream fulfils the control of that id sent on that stream.
  // False (and nothing changes) when no such control waits: late, unknown, or another stream's.
  bool DeliverReply(const LiveSession& from, const v1::ControlReply& reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Controls sent and neither answered, failed nor given up on.
  size_t pending_controls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Takes the control of `id` out of the pending set; null when it is not there.
  std::shared_ptr<PendingControl> TakePending(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<SessionKey, std::shared_ptr<LiveSession>> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingControl>> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_control_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace flopscope::daemon
