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
#include "daemon/catalog/catalog.h"
#include "daemon/ingest/session_registry.h"
#include "daemon/metrics/metrics_registry.h"
#include "daemon/store/rank_store.h"
#include "daemon/store/store_registry.h"
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

// The ingest side: one bidi Stream per producer process, served on its own gRPC thread
// (synchronous API). The first message must be a hello (validated before anything touches the
// file system); the daemon answers Welcome{committed_seq}, then for each batch validates,
// commits and answers Ack{committed_seq}. Duplicates are acknowledged without being written. A
// bad batch ends the stream with INVALID_ARGUMENT, the validator's message and trailing metadata
// `flopscope-rejected-seq: <seq>`; nothing of it is stored and every other stream carries on.
// After its Welcome a stream is listed in the SessionRegistry until it ends, so that Controls can
// be sent down it; the ControlReplies it reads go back to the registry.
//
// Thread-safe: streams share only the StoreRegistry, the Catalog and the SessionRegistry, all
// thread-safe.
class CollectorService final : public v1::Collector::Service {
 public:
  // Serves Stream with CheckedUpMessage reads (the generated handler is replaced).
  CollectorService(StoreRegistry* stores, Catalog* catalog, SessionRegistry* sessions);

  // Called on the stream's thread once a rank's session is connected and welcomed (the query
  // side opens its reader while the writer holds the file). Set before serving.
  using ConnectedHook = std::function<void(const std::string& job_id, int32_t rank)>;
  void SetConnectedHook(ConnectedHook hook) { connected_hook_ = std::move(hook); }
  // Told of every stream, committed batch and rejection (`flopscoped --metrics`); set before
  // serving, may stay null.
  void SetMetrics(metrics::MetricsRegistry* metrics) { metrics_ = metrics; }
  // Who may write to which job (required: set before serving).
  void SetAccessControl(const AccessControl* access) { access_ = access; }
  // Told of every batch that is committed (or was already) before its Ack goes back:
  // `flopscoped --upstream` keeps it for the aggregator (daemon/forwarding/outbox.h). Set before
  // serving, may stay null.
  using CommittedHook = std::function<void(const v1::SessionHello& hello, const v1::Batch& batch)>;
  void SetCommittedHook(CommittedHook hook) { committed_hook_ = std::move(hook); }

 private:
  using ServerStream = grpc::ServerReaderWriter<v1::DownMessage, CheckedUpMessage>;
  grpc::Status Serve(grpc::ServerContext* context, ServerStream* stream);
  // Everything a connected stream needs to store its batches.
  struct Connection {
    const v1::SessionHello& hello;
    std::shared_ptr<RankStore> store;  // held for the stream's life, shared with its rank's
    int64_t sid;
    uint64_t committed_seq;
    // Every write after the Welcome goes through it: Controls share the stream (LiveSession).
    std::shared_ptr<LiveSession> live;
  };

  static grpc::Status ReadHello(ServerStream* stream, CheckedUpMessage* first);
  // Validates the hello, checks that `caller` may write to its job (claiming a new one) and the
  // session's resume token (`*issued_token`: one drawn for a hello without), opens the rank's
  // store and session, and lists it in the catalog.
  absl::StatusOr<Connection> Connect(const PeerIdentity& caller, const v1::SessionHello& hello,
                                     absl::string_view token, std::string* issued_token);
  grpc::Status ServeBatches(grpc::ServerContext* context, ServerStream* stream,
                            const Connection& connection, StreamTally* tally);
  // The stream is over: the session's end counts (RankStore::EndStream), then the catalog.
  void EndStream(const Connection& connection, const StreamTally& tally);
  void DeliverControlReply(const Connection& connection, const v1::ControlReply& reply);
  // The rank's totals as its store has them now, into the catalog. The snapshot and the write
  // are one step under totals_mu_: two streams of one rank (a node forwards each session on its
  // own stream, in parallel) would otherwise let an older snapshot be written last.
  absl::Status PublishTotals(const Connection& connection, int64_t now_ns)
      ABSL_LOCKS_EXCLUDED(totals_mu_);
  // A `parallel` mark in the batch becomes the rank's layout in the catalog.
  void RecordAnnouncedLayout(const Connection& connection, const v1::Batch& batch);
  grpc::Status StoreBatch(grpc::ServerContext* context, const Connection& connection,
                          const v1::Batch& batch, StreamTally* tally);
  static void LogDisconnect(const v1::SessionHello& hello, const grpc::Status& status);

  StoreRegistry* stores_;
  Catalog* catalog_;
  SessionRegistry* sessions_;
  ConnectedHook connected_hook_;
  CommittedHook committed_hook_;
  metrics::MetricsRegistry* metrics_ = nullptr;
  const AccessControl* access_ = nullptr;
  absl::Mutex totals_mu_;  // see PublishTotals
};

}  // namespace flopscope::daemon
