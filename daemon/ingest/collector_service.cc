#include "daemon/ingest/collector_service.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/version.h"
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

// One Collector stream: its state and its reactions (collector_service.h). Three kinds of thread
// drive it: gRPC's event threads run the reactions (OnReadDone, OnWriteDone, OnDone), which never
// block; a worker of the service's IngestWorkers runs its blocking steps (Admit, Hello, Batch,
// Unparsable, the End), one at a time; and any thread that writes a Control down its LiveSession
// (the Profiling service's) queues a message.
//
// The read side is a chain: a read is started only when the previous message has been handled
// (inline, or by its worker task), so at most one read or one task is outstanding, never both;
// `in_`, the connection and the tally belong to whichever link of the chain runs, and each link
// hands them on by starting the next (gRPC and the worker queue order the two). The chain ends
// in Conclude, exactly once. The write side is a queue under mu_ with one write in flight; the
// stream is finished once it has concluded and the queue is empty (or broken); OnDone, which
// gRPC calls after the Finish and every operation, deletes the reactor.
//
// Hazard: gRPC may also run a reaction inline, on the thread that started the operation (a
// worker, a Profiling thread), before StartRead, StartWrite or Finish returns. So no lock is
// held across those calls, and each is the last thing its caller does with the reactor: after a
// Finish, or once the chain is handed on, OnDone may already have deleted it.
class CollectorService::StreamReactor final
    : public grpc::ServerBidiReactor<CheckedUpMessage, v1::DownMessage> {
 public:
  // Runs on the gRPC thread that accepted the call: posts the admission, blocks on nothing but
  // the watchdog's lock.
  StreamReactor(CollectorService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    // Silent streams are ended (stream_watchdog.h): the hello must come soon, then messages.
    if (service_->watchdog_ != nullptr) watch_ = service_->watchdog_->Start(context_);
    service_->workers_.Post([this] { Admit(); });
  }

  // gRPC event thread: the next message of the chain (or the stream's end). Blocks on nothing
  // but short locks (the watchdog's, the registry's); what blocks is posted to a worker.
  void OnReadDone(bool ok) override;
  // gRPC event thread: the queue's front went out (or the stream broke). Takes mu_ only.
  void OnWriteDone(bool ok) override;
  // gRPC event thread, when the peer goes away or the call is cancelled (the watchdog, the
  // server's shutdown). Nothing to do: the read or write in flight fails and the chain concludes
  // (a worker task in flight finishes first, and its next read fails at once).
  void OnCancel() override {}
  // gRPC event thread, after Finish and every operation: the last thing that touches this.
  void OnDone() override { delete this; }

 private:
  // Worker tasks.
  void Admit();
  void Hello();
  void Batch();
  void Unparsable();
  void End(grpc::Status status);

  // Starts the next read, or leaves it to OnWriteDone while too many writes wait.
  void ContinueReading() ABSL_LOCKS_EXCLUDED(mu_);
  // The read chain's last link: ends the connected session on a worker (End), or finishes now.
  void Conclude(grpc::Status status);
  // Finishes with `status` once no write is in flight (OnWriteDone does it otherwise).
  void FinishWhenWritten(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `message` for writing; false once the stream is broken or finishing. Any thread.
  bool Enqueue(const v1::DownMessage& message) ABSL_LOCKS_EXCLUDED(mu_);
  // Lets go of the stream's watch and peer slot, then Finish. Reached exactly once.
  void FinishNow(grpc::Status status);

  CollectorService* const service_;
  grpc::CallbackServerContext* const context_;
  // Set by Admit, let go in FinishNow (before Finish, as the synchronous handler returned).
  std::unique_ptr<PeerLimits::Slot> slot_;
  std::unique_ptr<StreamWatchdog::Watch> watch_;
  std::optional<PeerIdentity> caller_;
  // The read chain's (see above): the message read into, reused for the whole stream (parsing
  // into it keeps its allocated records), the hello once connected, the session, the tally.
  CheckedUpMessage in_;
  v1::SessionHello hello_;
  std::optional<Connection> connection_;
  StreamTally tally_;

  // Hazard: guards the write queue and the finish; held for a few instructions, never across a
  // call into gRPC (StartWrite, StartRead, Finish) or any other lock but the allocator's.
  absl::Mutex mu_;
  // Messages to write; the front is in flight while `writing_`. A deque: its elements stay put
  // while others are added, so the front can be handed to StartWrite outside the lock.
  std::deque<v1::DownMessage> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;       // a write failed: nothing more goes out
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;  // the chain waits for the queue to shrink
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);  // concluded, with this status
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

void CollectorService::StreamReactor::Admit() {
  // Who is calling, first, before anything has an effect (daemon/access/access_policy.h). On a
  // worker: a TLS peer's subject is looked up in the user database (NSS), which may block.
  absl::StatusOr<PeerIdentity> caller = service_->access_->IdentifyWriter(*context_);
  if (!caller.ok()) return Conclude(ToGrpcStatus(caller.status()));
  caller_ = *std::move(caller);
  // Its place among the streams one peer may hold, kept until the stream ends (peer_limits.h).
  if (service_->limits_ != nullptr) {
    absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> admitted =
        service_->limits_->AdmitStream(*caller_);
    if (!admitted.ok()) {
      LogWarning("refused a stream from ", DescribePeer(*caller_), ": ",
                 admitted.status().message());
      context_->AddTrailingMetadata(kRefusalReasonKey, RefusalReason(admitted.status().message()));
      return Conclude(ToGrpcStatus(admitted.status()));
    }
    slot_ = *std::move(admitted);
  }
  StartRead(&in_);  // the hello
}

void CollectorService::StreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    if (!connection_.has_value()) {
      return Conclude(
          grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended before its SessionHello"));
    }
    return Conclude(context_->IsCancelled() ? ClientGone() : grpc::Status::OK);
  }
  if (watch_ != nullptr) watch_->Heard();
  const v1::UpMessage& message = in_.message;
  if (!connection_.has_value()) {
    if (in_.parse_error) return Conclude(NotParsed("first"));
    if (!message.has_hello()) {
      return Conclude(
          grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                       absl::StrCat("the first message of a stream must be a SessionHello, got ",
                                    MessageKind(message))));
    }
    return service_->workers_.Post([this] { Hello(); });
  }
  if (in_.parse_error) return service_->workers_.Post([this] { Unparsable(); });
  switch (message.msg_case()) {
    case v1::UpMessage::kBatch:
      return service_->workers_.Post([this] { Batch(); });
    case v1::UpMessage::kProgress:
      tally_.announced = std::max(tally_.announced, message.progress().records_queued());
      return ContinueReading();
    case v1::UpMessage::kControlReply:
      // The registry's and the control's locks only: the waiting requester is woken, not run.
      service_->DeliverControlReply(*connection_, message.control_reply());
      return ContinueReading();
    case v1::UpMessage::kHello:
    case v1::UpMessage::MSG_NOT_SET:
      break;
  }
  Conclude(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("expected a Batch or ControlReply after the hello, got ",
                                     MessageKind(message))));
}

void CollectorService::StreamReactor::Hello() {
  hello_ = std::move(*in_.message.mutable_hello());
  // The resume token goes no further than its check: never stored with the hello, never logged.
  const std::string token = std::move(*hello_.mutable_resume_token());
  hello_.clear_resume_token();
  const std::string named_job = hello_.job_id();
  std::string issued_token;
  // Connect sets the hello's job id to the one the session is stored under.
  absl::StatusOr<Connection> connection =
      service_->Connect(*caller_, &hello_, token, &issued_token);
  if (!connection.ok()) {
    // Who the kernel says called (pid 0: a TLS peer, whose pid no kernel here knows); the
    // hello's pid is the caller's claim and is named as such.
    LogWarning("refused a stream from uid ", caller_->uid, " pid ", caller_->pid,
               " (its hello claims pid ", hello_.pid(), "): ", connection.status().message());
    // The producer prints this beside what it spooled, so the rank's own stderr says why.
    context_->AddTrailingMetadata(kRefusalReasonKey,
                                  IsDiskFull(connection.status())
                                      ? std::string(kDiskFullReason)
                                      : RefusalReason(connection.status().message()));
    return Conclude(ToGrpcStatus(connection.status()));
  }
  connection_.emplace(*std::move(connection));
  // A node daemon's forwarded stream (IdentifyWriter vouched for its claim) may carry the
  // records its outbox dropped (LOSS_CAUSE_FORWARD_DROPPED); no producer may.
  if (!caller_->forwarded_by.empty()) connection_->session.origin = BatchOrigin::kNodeDaemon;
  v1::DownMessage welcome;
  welcome.mutable_welcome()->set_committed_seq(connection_->session.committed_seq);
  welcome.mutable_welcome()->set_daemon_version(kVersion);
  if (!issued_token.empty()) welcome.mutable_welcome()->set_resume_token(issued_token);
  if (hello_.job_id() != named_job)
    welcome.mutable_welcome()->set_stored_as_job_id(hello_.job_id());
  // Queued before the stream is listed, so every Control goes out after it.
  Enqueue(welcome);
  connection_->live = service_->sessions_->Register(
      SessionKey{hello_.job_id(), hello_.rank(), hello_.session_id()},
      [this](const v1::DownMessage& message) { return Enqueue(message); });
  if (service_->metrics_ != nullptr) service_->metrics_->OnConnected(hello_);
  ContinueReading();
}

void CollectorService::StreamReactor::Batch() {
  v1::DownMessage ack;
  grpc::Status status =
      service_->StoreBatch(context_, *connection_, in_.message.batch(), &tally_, &ack);
  if (!status.ok()) return Conclude(std::move(status));
  if (!connection_->live->Write(ack)) return Conclude(ClientGone());
  ContinueReading();
}

void CollectorService::StreamReactor::Unparsable() {
  LogWarning(DescribeSession(hello_), ": a message that does not parse ended the stream");
  // Counted like a rejected batch (its records, if it held any, cannot be known).
  const absl::Status counted = service_->catalog_->AddRejection(
      hello_.job_id(), hello_.rank(), hello_.session_id(), "unparsable", 0);
  if (!counted.ok()) LogWarning("catalog: ", counted.message());
  Conclude(NotParsed("next"));
}

void CollectorService::StreamReactor::Conclude(grpc::Status status) {
  if (!connection_.has_value()) return FinishWhenWritten(std::move(status));
  // Ending the session writes its store: on a worker (this may be a reaction).
  service_->workers_.Post([this, status = std::move(status)] { End(status); });
}

void CollectorService::StreamReactor::End(grpc::Status status) {
  CollectorService::LogDisconnect(hello_, status);
  if (service_->metrics_ != nullptr) service_->metrics_->OnDisconnected(hello_);
  // After it nothing new is queued by a Control; what is queued still goes out before Finish.
  service_->sessions_->Unregister(connection_->live);
  // The session's end counts (what the producer announced and did not send).
  service_->ingest_->End(connection_->session, tally_).IgnoreError();
  if (service_->ended_hook_) service_->ended_hook_();
  FinishWhenWritten(std::move(status));
}

void CollectorService::StreamReactor::ContinueReading() {
  {
    absl::MutexLock lock(&mu_);
    if (writes_.size() >= kMaxQueuedWrites && !broken_) {
      read_paused_ = true;  // OnWriteDone reads on once the queue is shorter
      return;
    }
  }
  StartRead(&in_);  // a broken stream's read fails at once, and the chain concludes
}

bool CollectorService::StreamReactor::Enqueue(const v1::DownMessage& message) {
  const v1::DownMessage* start = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (broken_ || finish_.has_value()) return false;
    writes_.push_back(message);
    if (!writing_) {
      writing_ = true;
      start = &writes_.front();
    }
  }
  if (start != nullptr) StartWrite(start);  // only the thread that set writing_ gets here
  return true;
}

void CollectorService::StreamReactor::OnWriteDone(bool ok) {
  const v1::DownMessage* next = nullptr;
  bool read = false;
  bool conclude = false;
  std::optional<grpc::Status> finish;
  {
    absl::MutexLock lock(&mu_);
    writes_.pop_front();
    if (!ok) {  // the peer went away or the call was cancelled: nothing more goes out
      broken_ = true;
      writes_.clear();
    }
    if (!writes_.empty()) {
      next = &writes_.front();
    } else {
      writing_ = false;
      if (finish_.has_value() && !finished_) {
        finished_ = true;
        finish = finish_;
      }
    }
    if (read_paused_ && (broken_ || writes_.size() < kMaxQueuedWrites)) {
      read_paused_ = false;
      // A broken stream will not be read again: the chain concludes here instead.
      (broken_ ? conclude : read) = true;
    }
  }
  if (next != nullptr) StartWrite(next);
  if (read) StartRead(&in_);
  if (conclude) Conclude(ClientGone());
  if (finish.has_value()) FinishNow(*std::move(finish));
}

void CollectorService::StreamReactor::FinishWhenWritten(grpc::Status status) {
  {
    absl::MutexLock lock(&mu_);
    finish_ = status;
    if (writing_) return;  // OnWriteDone finishes once the queue is out
    finished_ = true;
  }
  FinishNow(std::move(status));
}

void CollectorService::StreamReactor::FinishNow(grpc::Status status) {
  // The watchdog lets go of the context, and the peer's slot is free for its next stream,
  // before the peer can hear of this one's end.
  watch_.reset();
  slot_.reset();
  Finish(std::move(status));
}

CollectorService::CollectorService(IngestPath* ingest, Catalog* catalog, SessionRegistry* sessions,
                                   int workers)
    : ingest_(ingest), catalog_(catalog), sessions_(sessions), workers_(workers) {
  // Method 0 is Stream, the service's only one (collector.proto).
  MarkMethodCallback(
      0, new grpc::internal::CallbackBidiHandler<CheckedUpMessage, v1::DownMessage>(
             // A gRPC event thread: the reactor's constructor posts its work and returns.
             [this](grpc::CallbackServerContext* context) {
               return new StreamReactor(this, context);
             }));
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

void CollectorService::DeliverControlReply(const Connection& connection,
                                           const v1::ControlReply& reply) {
  if (sessions_->DeliverReply(*connection.live, reply)) return;
  // Late (its requester gave up) or never asked of this stream: nothing waits for it.
  LogDebug("dropped control reply ", reply.id(), " from ", DescribeSession(connection.hello),
           ": no request of that id is waiting on this stream");
}

grpc::Status CollectorService::StoreBatch(grpc::CallbackServerContext* context,
                                          const Connection& connection, const v1::Batch& batch,
                                          StreamTally* tally, v1::DownMessage* ack) {
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
  ack->mutable_ack()->set_committed_seq(outcome->committed_seq);
  return grpc::Status::OK;
}

}  // namespace flopscope::daemon
