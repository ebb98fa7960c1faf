#include "daemon/ingest/collector_service.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/version.h"
#include "daemon/base/cpu_priority.h"
#include "daemon/base/grpc_status.h"
#include "daemon/base/logger.h"
#include "daemon/store/disk_space.h"
#include "daemon/validate/hello_validator.h"

namespace flopscope::daemon {
namespace {

// A refusal's message as trailer metadata: gRPC carries only printable ASCII in a text value, and
// the producer keeps 63 bytes of it (fs_transport_stats.refusal).
std::string RefusalReason(absl::string_view message) {
  std::string reason(message.substr(0, 63));
  for (char& c : reason) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return reason;
}

const char* MessageKind(const v1::UpMessage& message) {
  switch (message.msg_case()) {
    case v1::UpMessage::kHello:
      return "a SessionHello";
    case v1::UpMessage::kBatch:
      return "a Batch";
    case v1::UpMessage::kControlReply:
      return "a ControlReply";
    case v1::UpMessage::kProgress:
      return "a Progress";
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

grpc::Status NotParsed(const char* which) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the ", which,
                                   " message of the stream is not a flopscope.v1.UpMessage (it "
                                   "does not parse): is the producer a flopscope injector?"));
}

}  // namespace
}  // namespace flopscope::daemon

grpc::Status grpc::SerializationTraits<flopscope::daemon::CheckedUpMessage, void>::Deserialize(
    grpc::ByteBuffer* buffer, flopscope::daemon::CheckedUpMessage* message) {
  // Always OK, so that the Read succeeds and the service sees the flag.
  message->parse_error =
      !grpc::GenericDeserialize<grpc::ProtoBufferReader, flopscope::v1::UpMessage>(
           buffer, &message->message)
           .ok();
  return grpc::Status::OK;
}

grpc::Status grpc::SerializationTraits<flopscope::daemon::CheckedUpMessage, void>::Serialize(
    const flopscope::daemon::CheckedUpMessage& message, grpc::ByteBuffer* buffer,
    bool* own_buffer) {
  return grpc::GenericSerialize<grpc::ProtoBufferWriter, flopscope::v1::UpMessage>(
      message.message, buffer, own_buffer);
}

namespace flopscope::daemon {

CollectorService::CollectorService(IngestPath* ingest, Catalog* catalog, SessionRegistry* sessions)
    : ingest_(ingest), catalog_(catalog), sessions_(sessions) {
  // Method 0 is Stream, the service's only one (collector.proto).
  MarkMethodStreamed(
      0,
      new grpc::internal::BidiStreamingHandler<CollectorService, CheckedUpMessage, v1::DownMessage>(
          [](CollectorService* service, grpc::ServerContext* context, ServerStream* stream) {
            return service->Serve(context, stream);
          },
          this));
}

grpc::Status CollectorService::Serve(grpc::ServerContext* context, ServerStream* stream) {
  // A stream's commits run behind the queries (cpu_priority.h); the thread is back at the
  // daemon's priority when the stream ends and gRPC hands it another call.
  const ScopedThreadNice behind_queries(kBackgroundNice);
  // Who is calling, first, before anything has an effect (daemon/access/access_policy.h).
  absl::StatusOr<PeerIdentity> caller = access_->IdentifyWriter(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // Its place among the streams one peer may hold, kept until the stream ends (peer_limits.h).
  std::unique_ptr<PeerLimits::Slot> slot;
  if (limits_ != nullptr) {
    absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> admitted = limits_->AdmitStream(*caller);
    if (!admitted.ok()) {
      LogWarning("refused a stream from ", DescribePeer(*caller), ": ",
                 admitted.status().message());
      context->AddTrailingMetadata(kRefusalReasonKey, RefusalReason(admitted.status().message()));
      return ToGrpcStatus(admitted.status());
    }
    slot = *std::move(admitted);
  }
  // Silent streams are ended (stream_watchdog.h): the hello must come soon, then messages.
  std::unique_ptr<StreamWatchdog::Watch> watch;
  if (watchdog_ != nullptr) watch = watchdog_->Start(context);
  CheckedUpMessage first;
  if (grpc::Status s = ReadHello(stream, &first); !s.ok()) return s;
  if (watch != nullptr) watch->Heard();
  // The resume token goes no further than its check: never stored with the hello, never logged.
  const std::string token = std::move(*first.message.mutable_hello()->mutable_resume_token());
  first.message.mutable_hello()->clear_resume_token();
  const std::string named_job = first.message.hello().job_id();
  // Connect sets its job id to the one the session is stored under.
  v1::SessionHello& hello = *first.message.mutable_hello();
  std::string issued_token;
  absl::StatusOr<Connection> connection = Connect(*caller, &hello, token, &issued_token);
  if (!connection.ok()) {
    // Who the kernel says called (pid 0: a TLS peer, whose pid no kernel here knows); the
    // hello's pid is the caller's claim and is named as such.
    LogWarning("refused a stream from uid ", caller->uid, " pid ", caller->pid,
               " (its hello claims pid ", hello.pid(), "): ", connection.status().message());
    // The producer prints this beside what it spooled, so the rank's own stderr says why.
    context->AddTrailingMetadata(kRefusalReasonKey,
                                 IsDiskFull(connection.status())
                                     ? std::string(kDiskFullReason)
                                     : RefusalReason(connection.status().message()));
    return ToGrpcStatus(connection.status());
  }
  // A node daemon's forwarded stream (IdentifyWriter vouched for its claim) may carry the
  // records its outbox dropped (LOSS_CAUSE_FORWARD_DROPPED); no producer may.
  if (!caller->forwarded_by.empty()) {
    connection->session.origin = BatchOrigin::kNodeDaemon;
  }
  StreamTally tally;
  // The stream is over: the session's end counts (what the producer announced and did not send).
  absl::Cleanup disconnected = [&] {
    ingest_->End(connection->session, tally).IgnoreError();
    if (ended_hook_) ended_hook_();
  };
  v1::DownMessage welcome;
  welcome.mutable_welcome()->set_committed_seq(connection->session.committed_seq);
  welcome.mutable_welcome()->set_daemon_version(kVersion);
  if (!issued_token.empty()) welcome.mutable_welcome()->set_resume_token(issued_token);
  if (hello.job_id() != named_job) welcome.mutable_welcome()->set_stored_as_job_id(hello.job_id());
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
  if (metrics_ != nullptr) metrics_->OnConnected(hello);
  absl::Cleanup unmetered = [&] {
    if (metrics_ != nullptr) metrics_->OnDisconnected(hello);
  };
  const grpc::Status status = ServeBatches(context, stream, *connection, &tally, watch.get());
  LogDisconnect(hello, status);
  return status;
}

grpc::Status CollectorService::ReadHello(ServerStream* stream, CheckedUpMessage* first) {
  if (!stream->Read(first)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended before its SessionHello");
  }
  if (first->parse_error) return NotParsed("first");
  if (first->message.has_hello()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("the first message of a stream must be a SessionHello, got ",
                                   MessageKind(first->message)));
}

absl::StatusOr<CollectorService::Connection> CollectorService::Connect(const PeerIdentity& caller,
                                                                       v1::SessionHello* named,
                                                                       absl::string_view token,
                                                                       std::string* issued_token) {
  const v1::SessionHello& hello = *named;
  // Validated before the job id becomes a directory name or a catalog key.
  if (absl::Status s = ValidateHello(hello); !s.ok()) return s;
  // The disk reserve before the claim: a refused stream leaves no owner and no token behind.
  if (absl::Status s = ingest_->CheckSpace(); !s.ok()) return s;  // logged by the caller
  absl::StatusOr<std::string> stored = access_->ClaimForWrite(caller, hello.job_id());
  if (!stored.ok()) return stored.status();
  if (*stored != hello.job_id()) {
    // Both owners are told: this one by its Welcome, the id's owner in `jobs` (kept_apart).
    LogWarning("job ", hello.job_id(), " belongs to another user: the run of ",
               DescribePeer(caller), " is kept apart as job ", *stored);
    named->set_job_id(*std::move(stored));
  }
  absl::StatusOr<std::string> issued = access_->CheckResumeToken(hello, token);
  if (!issued.ok()) return issued.status();
  *issued_token = *std::move(issued);
  absl::StatusOr<IngestPath::Session> session = ingest_->Open(hello);
  if (!session.ok()) {
    if (IsDiskFull(session.status())) return DiskFullRefusal(session.status());
    return absl::UnavailableError(
        absl::StrCat("the daemon cannot store this session now: ", session.status().message()));
  }
  LogInfo("connected ", DescribeSession(hello), " (host ", hello.host(), " pid ", hello.pid(),
          "), committed seq ", session->committed_seq);
  return Connection{hello, *std::move(session), nullptr};
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
  LogInfo("disconnected ", DescribeSession(hello), why);
}

grpc::Status CollectorService::ServeBatches(grpc::ServerContext* context, ServerStream* stream,
                                            const Connection& connection, StreamTally* tally,
                                            StreamWatchdog::Watch* watch) {
  // One message reused for the whole stream: parsing into it keeps its allocated records.
  CheckedUpMessage checked;
  const v1::UpMessage& message = checked.message;
  while (stream->Read(&checked)) {
    if (watch != nullptr) watch->Heard();
    if (checked.parse_error) {
      LogWarning(DescribeSession(connection.hello),
                 ": a message that does not parse ended the stream");
      // Counted like a rejected batch (its records, if it held any, cannot be known).
      const absl::Status counted =
          catalog_->AddRejection(connection.hello.job_id(), connection.hello.rank(),
                                 connection.hello.session_id(), "unparsable", 0);
      if (!counted.ok()) LogWarning("catalog: ", counted.message());
      return NotParsed("next");
    }
    switch (message.msg_case()) {
      case v1::UpMessage::kBatch:
        if (grpc::Status s = StoreBatch(context, connection, message.batch(), tally); !s.ok()) {
          return s;
        }
        break;
      case v1::UpMessage::kProgress:
        tally->announced = std::max(tally->announced, message.progress().records_queued());
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
  LogDebug("dropped control reply ", reply.id(), " from ", DescribeSession(connection.hello),
           ": no request of that id is waiting on this stream");
}

grpc::Status CollectorService::StoreBatch(grpc::ServerContext* context,
                                          const Connection& connection, const v1::Batch& batch,
                                          StreamTally* tally) {
  absl::StatusOr<CommitOutcome> outcome = ingest_->Commit(connection.session, batch, tally);
  if (absl::IsInvalidArgument(outcome.status())) {  // logged and counted by the IngestPath
    context->AddTrailingMetadata(kRejectedSeqKey, std::to_string(batch.seq()));
    return ToGrpcStatus(outcome.status());
  }
  if (IsDiskFull(outcome.status())) {
    // RESOURCE_EXHAUSTED with the reason: the injector keeps (or spools) the batch and says why.
    LogError("storing ", DescribeSession(connection.hello),
             " refused: ", outcome.status().message());
    context->AddTrailingMetadata(kRefusalReasonKey, kDiskFullReason);
    return ToGrpcStatus(DiskFullRefusal(outcome.status()));
  }
  if (!outcome.ok()) {
    LogError("storing ", DescribeSession(connection.hello),
             " failed: ", outcome.status().message());
    // UNAVAILABLE: the injector keeps the batch unacknowledged and resends it later.
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(outcome.status().message()));
  }
  v1::DownMessage ack;
  ack.mutable_ack()->set_committed_seq(outcome->committed_seq);
  if (!connection.live->Write(ack)) return ClientGone();
  return grpc::Status::OK;
}

}  // namespace flopscope::daemon
