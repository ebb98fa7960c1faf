#include "daemon/collector_service.h"

#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/version.h"
#include "daemon/batch_validator.h"
#include "daemon/disk_space.h"
#include "daemon/grpc_status.h"
#include "daemon/hello_validator.h"
#include "daemon/logger.h"
#include "daemon/parallel_mark.h"

namespace flopscope::daemon {
namespace {

std::string Describe(const v1::SessionHello& hello) {
  return absl::StrCat("job ", hello.job_id(), " rank ", hello.rank(), " session ",
                      hello.session_id());
}

const char* MessageKind(const v1::UpMessage& message) {
  switch (message.msg_case()) {
    case v1::UpMessage::kHello:
      return "a SessionHello";
    case v1::UpMessage::kBatch:
      return "a Batch";
    case v1::UpMessage::kControlReply:
      return "a ControlReply";
    case v1::UpMessage::MSG_NOT_SET:
      break;
  }
  return "an empty UpMessage";
}

std::string StatusCodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

grpc::Status ClientGone() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
}

}  // namespace

grpc::Status CollectorService::Stream(grpc::ServerContext* context, ServerStream* stream) {
  v1::UpMessage first;
  if (grpc::Status s = ReadHello(stream, &first); !s.ok()) return s;
  const v1::SessionHello& hello = first.hello();
  absl::StatusOr<Connection> connection = Connect(hello);
  if (!connection.ok()) {
    LogWarning("refused a stream from pid ", hello.pid(), ": ", connection.status().message());
    if (IsDiskFull(connection.status())) {
      context->AddTrailingMetadata(kRefusalReasonKey, kDiskFullReason);
    }
    return ToGrpcStatus(connection.status());
  }
  absl::Cleanup disconnected = [&] {
    // The totals again: an update refused after some commit (disk full) is caught up here.
    const int64_t now_ns = absl::GetCurrentTimeNanos();
    const absl::Status totals = catalog_->UpdateTotals(hello.job_id(), hello.rank(),
                                                       connection->store->Totals(), now_ns);
    if (!totals.ok()) LogWarning("catalog: ", totals.message());
    const absl::Status s = catalog_->SessionDisconnected(hello.job_id(), hello.rank(), now_ns);
    if (!s.ok()) LogWarning("catalog: ", s.message());
  };
  v1::DownMessage welcome;
  welcome.mutable_welcome()->set_committed_seq(connection->committed_seq);
  welcome.mutable_welcome()->set_daemon_version(kVersion);
  // Written before the stream is listed, so nothing else can be writing yet.
  if (!stream->Write(welcome)) {
    LogDisconnect(hello, ClientGone());
    return ClientGone();
  }
  connection->live = sessions_->Register(
      SessionKey{hello.job_id(), hello.rank(), hello.session_id()},
      [stream](const v1::DownMessage& message) { return stream->Write(message); });
  // Runs before `disconnected`; after it nothing writes on `stream`, which dies with this call.
  absl::Cleanup delisted = [&] { sessions_->Unregister(connection->live); };
  if (connected_hook_) connected_hook_(hello.job_id(), hello.rank());
  const grpc::Status status = ServeBatches(context, stream, *connection);
  LogDisconnect(hello, status);
  return status;
}

grpc::Status CollectorService::ReadHello(ServerStream* stream, v1::UpMessage* first) {
  if (!stream->Read(first)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended before its SessionHello");
  }
  if (first->has_hello()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("the first message of a stream must be a SessionHello, got ",
                                   MessageKind(*first)));
}

absl::StatusOr<CollectorService::Connection> CollectorService::Connect(
    const v1::SessionHello& hello) {
  // Validated before the job id becomes a directory name.
  if (absl::Status s = ValidateHello(hello); !s.ok()) return s;
  if (absl::Status s = stores_->CheckSpace(); !s.ok()) return s;  // logged by the caller
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_->Acquire(hello.job_id(), hello.rank());
  absl::StatusOr<SessionHandle> session =
      store.ok() ? (*store)->OpenSession(hello) : absl::StatusOr<SessionHandle>(store.status());
  if (!session.ok()) {
    LogError("cannot store ", Describe(hello), ": ", session.status().message());
    if (IsDiskFull(session.status())) return DiskFullRefusal(session.status());
    return absl::UnavailableError(
        absl::StrCat("the daemon cannot store this session now: ", session.status().message()));
  }
  // Listings are a convenience: a catalog failure is logged, never fatal to the data stream.
  const absl::Status listed = catalog_->SessionConnected(hello, absl::GetCurrentTimeNanos());
  if (!listed.ok()) LogWarning("catalog: ", listed.message());
  LogInfo("connected ", Describe(hello), " (host ", hello.host(), " pid ", hello.pid(),
          "), committed seq ", session->committed_seq);
  return Connection{hello, *std::move(store), session->sid, session->committed_seq, nullptr};
}

void CollectorService::LogDisconnect(const v1::SessionHello& hello, const grpc::Status& status) {
  // A rejection was logged with its reason already; other endings say why here.
  std::string why;
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    why = " (rejected)";
  } else if (!status.ok()) {
    why =
        absl::StrCat(" (", StatusCodeName(status.error_code()), ": ", status.error_message(), ")");
  }
  LogInfo("disconnected ", Describe(hello), why);
}

grpc::Status CollectorService::ServeBatches(grpc::ServerContext* context, ServerStream* stream,
                                            const Connection& connection) {
  // One message reused for the whole stream: parsing into it keeps its allocated records.
  v1::UpMessage message;
  while (stream->Read(&message)) {
    switch (message.msg_case()) {
      case v1::UpMessage::kBatch:
        if (grpc::Status s = StoreBatch(context, connection, message.batch()); !s.ok()) return s;
        break;
      case v1::UpMessage::kControlReply:
        DeliverControlReply(connection, message.control_reply());
        break;
      case v1::UpMessage::kHello:
      case v1::UpMessage::MSG_NOT_SET:
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            absl::StrCat("expected a Batch or ControlReply after the hello, got ",
                                         MessageKind(message)));
    }
  }
  if (context->IsCancelled()) return ClientGone();
  return grpc::Status::OK;
}

void CollectorService::DeliverControlReply(const Connection& connection,
                                           const v1::ControlReply& reply) {
  if (sessions_->DeliverReply(*connection.live, reply)) return;
  // Late (its requester gave up) or never asked of this stream: nothing waits for it.
  LogDebug("dropped control reply ", reply.id(), " from ", Describe(connection.hello),
           ": no request of that id is waiting on this stream");
}

void CollectorService::RecordAnnouncedLayout(const Connection& connection, const v1::Batch& batch) {
  // The latest mark of the batch wins, as it would have had it arrived in a later batch.
  for (auto it = batch.metadata().rbegin(); it != batch.metadata().rend(); ++it) {
    if (it->key() != kParallelKey) continue;
    absl::StatusOr<v1::ParallelLayout> layout = ParseParallelMark(it->value());
    if (!layout.ok()) {
      // The mark is stored as metadata either way; only the layout stays as the hello said.
      LogWarning(Describe(connection.hello), ": ", layout.status().message());
      return;
    }
    const absl::Status set =
        catalog_->SetAnnouncedLayout(connection.hello.job_id(), connection.hello.rank(), *layout);
    if (!set.ok()) LogWarning("catalog: ", set.message());
    return;
  }
}

grpc::Status CollectorService::StoreBatch(grpc::ServerContext* context,
                                          const Connection& connection, const v1::Batch& batch) {
  CommitOutcome outcome;
  absl::Status status =
      stores_->CheckSpace(DiskSpaceGuard::CommitBytesFor(batch.ByteSizeLong()));
  if (status.ok()) status = connection.store->Commit(connection.sid, batch, &outcome);
  if (absl::IsInvalidArgument(status)) {
    LogWarning("rejected ", Describe(connection.hello), ": ", status.message());
    // Counted here, where the batch is dropped (the producer cannot count it), by rule.
    const absl::Status counted = catalog_->AddRejection(
        connection.hello.job_id(), connection.hello.rank(), connection.hello.session_id(),
        RejectedRule(status), BatchRecordCount(batch));
    if (!counted.ok()) LogWarning("catalog: ", counted.message());
    context->AddTrailingMetadata(kRejectedSeqKey, std::to_string(batch.seq()));
    return ToGrpcStatus(status);
  }
  if (IsDiskFull(status)) {
    // RESOURCE_EXHAUSTED with the reason: the injector keeps (or spools) the batch and says why.
    LogError("storing ", Describe(connection.hello), " refused: ", status.message());
    context->AddTrailingMetadata(kRefusalReasonKey, kDiskFullReason);
    return ToGrpcStatus(DiskFullRefusal(status));
  }
  if (!status.ok()) {
    LogError("storing ", Describe(connection.hello), " failed: ", status.message());
    // UNAVAILABLE: the injector keeps the batch unacknowledged and resends it later.
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(status.message()));
  }
  if (!outcome.duplicate) {
    RecordAnnouncedLayout(connection, batch);
    const absl::Status listed =
        catalog_->UpdateTotals(connection.hello.job_id(), connection.hello.rank(),
                               connection.store->Totals(), absl::GetCurrentTimeNanos());
    if (!listed.ok()) LogWarning("catalog: ", listed.message());
  }
  v1::DownMessage ack;
  ack.mutable_ack()->set_committed_seq(outcome.committed_seq);
  if (!connection.live->Write(ack)) return ClientGone();
  return grpc::Status::OK;
}

}  // namespace flopscope::daemon
