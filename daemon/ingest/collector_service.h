#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/access/access_policy.h"
#include "daemon/access/peer_limits.h"
#include "daemon/catalog/catalog.h"
#include "daemon/ingest/ingest_path.h"
#include "daemon/ingest/ingest_workers.h"
#include "daemon/ingest/session_registry.h"
#include "daemon/ingest/stream_watchdog.h"
#include "daemon/metrics/metrics_registry.h"
#include "daemon/store/rank_store.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon {

// An UpMessage as the Collector reads it. gRPC's generated handler reports bytes that do not
// parse as a failed Read, the same as the stream's end, so the stream would end OK; read into
// this instead, a message that does not parse arrives flagged and the stream ends
// INVALID_ARGUMENT (the SerializationTraits below).
struct CheckedUpMessage {
  v1::UpMessage message;
  bool parse_error = false;
};

}  // namespace flopscope::daemon

template <>
class grpc::SerializationTraits<flopscope::daemon::CheckedUpMessage, void> {
 public:
  static grpc::Status Deserialize(grpc::ByteBuffer* buffer,
                                  flopscope::daemon::CheckedUpMessage* message);
  static grpc::Status Serialize(const flopscope::daemon::CheckedUpMessage& message,
                                grpc::ByteBuffer* buffer, bool* own_buffer);
};

namespace flopscope::daemon {

// Trailing metadata key naming the batch a rejected stream ended on (collector.proto).
inline constexpr char kRejectedSeqKey[] = "flopscope-rejected-seq";
// Trailing metadata of a RESOURCE_EXHAUSTED refusal that is the daemon's own: its reason
// ("daemon disk full", kDiskFullReason), so a producer can tell it from gRPC's own
// RESOURCE_EXHAUSTED for an over-sized message.
inline constexpr char kRefusalReasonKey[] = "flopscope-refusal-reason";

// The ingest side: one bidi Stream per producer process (or per session a node daemon forwards).
// The first message must be a hello (validated before anything touches the file system); the
// daemon answers Welcome{committed_seq}, then for each batch ingests it (ingest_path.h: the one
// path a spool's batches take too) and answers Ack{committed_seq}. Duplicates are acknowledged
// without being written. A bad batch ends the stream with INVALID_ARGUMENT, the validator's
// message and trailing metadata `flopscope-rejected-seq: <seq>`; nothing of it is stored and
// every other stream carries on. After its Welcome a stream is listed in the SessionRegistry
// until it ends, so that Controls can be sent down it; the ControlReplies it reads go back to the
// registry.
//
// Served with gRPC's callback API (docs/design/load.md, "Thousands of streams"): a stream holds
// no thread while it waits. Its reactor (StreamReactor, collector_service.cc) is driven by
// reactions on gRPC's event threads, which never block: what may (the admission, the hello's
// job claim and file open, each batch's commit, the session's end) runs in the IngestWorkers
// pool, one task at a time per stream. A stream reads its next message only once its task is
// done and fewer than kMaxQueuedWrites messages wait to be written, so one stream's messages are
// handled in order and a peer that sends without reading its Acks is not read further.
//
// Thread-safe: streams share only the IngestPath, the Catalog, the SessionRegistry and the
// workers, all thread-safe.
class CollectorService final : public v1::Collector::Service {
 public:
  // Serves Stream with CheckedUpMessage reads (the generated handler is replaced by a callback
  // one). The stores, the catalog's session listings, the metrics of batches and the forwarder
  // are reached through `ingest`; `catalog` keeps the rejections of messages that never became a
  // batch. `workers` threads do the blocking work (ingest_workers.h).
  CollectorService(IngestPath* ingest, Catalog* catalog, SessionRegistry* sessions,
                   int workers = DefaultIngestWorkers());

  // Told of every stream's start and end (`flopscoped --metrics`; the batches are told by the
  // IngestPath); set before serving, may stay null.
  void SetMetrics(metrics::MetricsRegistry* metrics) { metrics_ = metrics; }
  // Who may write to which job (required: set before serving).
  void SetAccessControl(const AccessControl* access) { access_ = access; }
  // How many streams a peer may hold (peer_limits.h); set before serving, may stay null.
  void SetLimits(PeerLimits* limits) { limits_ = limits; }
  // Ends silent streams (stream_watchdog.h); set before serving, may stay null.
  void SetWatchdog(StreamWatchdog* watchdog) { watchdog_ = watchdog; }
  // Told after each stream's end: a process that ended without its final batch may have left
  // the rest in its spool (SpoolCollector::Nudge). Set before serving; may stay null.
  void SetEndedHook(std::function<void()> hook) { ended_hook_ = std::move(hook); }

  // Messages a stream may have waiting to be written (its Acks and Controls) before it stops
  // reading: a peer that does not read its Acks is not read further (gRPC's flow control then
  // holds it back), so its queue stays this short.
  static constexpr size_t kMaxQueuedWrites = 16;

 private:
  class StreamReactor;  // one stream's state and reactions (collector_service.cc)

  // Everything a connected stream needs to store its batches.
  struct Connection {
    const v1::SessionHello& hello;
    IngestPath::Session session;
    // Every write after the Welcome goes through it: Controls share the stream (LiveSession).
    std::shared_ptr<LiveSession> live;
  };

  // Validates the hello, claims its job for `caller` (setting `hello`'s job id to the one the
  // session is stored under: its own, or the run kept apart from another user's job), checks the
  // session's resume token (`*issued_token`: one drawn for a hello without), and opens the
  // session for ingest. Blocks (the catalog, the rank file): runs on a worker.
  absl::StatusOr<Connection> Connect(const PeerIdentity& caller, v1::SessionHello* hello,
                                     absl::string_view token, std::string* issued_token);
  void DeliverControlReply(const Connection& connection, const v1::ControlReply& reply);
  // Commits one batch; OK with `*ack` set, or the status that ends the stream (its trailing
  // metadata added to `context`). Blocks (SQLite): runs on a worker.
  grpc::Status StoreBatch(grpc::CallbackServerContext* context, const Connection& connection,
                          const v1::Batch& batch, StreamTally* tally, v1::DownMessage* ack);
  static void LogDisconnect(const v1::SessionHello& hello, const grpc::Status& status);

  IngestPath* ingest_;
  Catalog* catalog_;
  SessionRegistry* sessions_;
  metrics::MetricsRegistry* metrics_ = nullptr;
  const AccessControl* access_ = nullptr;
  PeerLimits* limits_ = nullptr;
  StreamWatchdog* watchdog_ = nullptr;
  std::function<void()> ended_hook_;
  // Last member: destroyed (its queue run, its threads joined) before anything a task uses.
  IngestWorkers workers_;
};

}  // namespace flopscope::daemon
