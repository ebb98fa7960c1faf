#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/catalog.h"
#include "daemon/rank_store.h"
#include "daemon/session_registry.h"
#include "daemon/store_registry.h"
#include "flopscope/v1/collector.grpc.pb.h"

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
  CollectorService(StoreRegistry* stores, Catalog* catalog, SessionRegistry* sessions)
      : stores_(stores), catalog_(catalog), sessions_(sessions) {}

  grpc::Status Stream(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::DownMessage, v1::UpMessage>* stream) override;

  // Called on the stream's thread once a rank's session is connected and welcomed (the query
  // side opens its reader while the writer holds the file). Set before serving.
  using ConnectedHook = std::function<void(const std::string& job_id, int32_t rank)>;
  void SetConnectedHook(ConnectedHook hook) { connected_hook_ = std::move(hook); }

 private:
  using ServerStream = grpc::ServerReaderWriter<v1::DownMessage, v1::UpMessage>;
  // Everything a connected stream needs to store its batches.
  struct Connection {
    const v1::SessionHello& hello;
    std::shared_ptr<RankStore> store;  // held for the stream's life, shared with its rank's
    int64_t sid;
    uint64_t committed_seq;
    // Every write after the Welcome goes through it: Controls share the stream (LiveSession).
    std::shared_ptr<LiveSession> live;
  };

  static grpc::Status ReadHello(ServerStream* stream, v1::UpMessage* first);
  // Validates the hello, opens the rank's store and session, and lists it in the catalog.
  absl::StatusOr<Connection> Connect(const v1::SessionHello& hello);
  grpc::Status ServeBatches(grpc::ServerContext* context, ServerStream* stream,
                            const Connection& connection);
  void DeliverControlReply(const Connection& connection, const v1::ControlReply& reply);
  // A `parallel` mark in the batch becomes the rank's layout in the catalog.
  void RecordAnnouncedLayout(const Connection& connection, const v1::Batch& batch);
  grpc::Status StoreBatch(grpc::ServerContext* context, const Connection& connection,
                          const v1::Batch& batch);
  static void LogDisconnect(const v1::SessionHello& hello, const grpc::Status& status);

  StoreRegistry* stores_;
  Catalog* catalog_;
  SessionRegistry* sessions_;
  ConnectedHook connected_hook_;
};

}  // namespace flopscope::daemon
