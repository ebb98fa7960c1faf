// The node daemon's forwarding thread: replays the Outbox to the aggregator's Collector.
#include "daemon/forwarding/forwarder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/tls/grpc_credentials.h"
#include "daemon/logger.h"

namespace flopscope::daemon::forwarding {
namespace {

// A stream that makes no progress for this long is given up (and retried).
constexpr absl::Duration kStreamDeadline = absl::Seconds(60);

using UpstreamStream = grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>;

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string Describe(const v1::SessionHello& hello) {
  return absl::StrCat("job ", hello.job_id(), " rank ", hello.rank(), " session ",
                      hello.session_id());
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> UpstreamChannel(const std::string& upstream,
                                                               const tls::TlsFilePaths& tls) {
  grpc::ChannelArguments arguments;
  // An aggregator back from a restart is found within a second or two, not gRPC's minutes.
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetMaxSendMessageSize(-1);
  if (absl::StartsWith(upstream, "unix:")) {
    return grpc::CreateCustomChannel(upstream, tls::ClientCredentials(std::nullopt), arguments);
  }
  if (!tls.any()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--upstream ", upstream,
        ": a TCP upstream needs mutual TLS (--tls-cert, --tls-key and --tls-ca: this node "
        "daemon's certificate and the aggregator's CA), or name the aggregator's socket as "
        "unix:/path"));
  }
  absl::StatusOr<tls::TlsPem> pem = tls::LoadTlsFiles(tls);
  if (!pem.ok()) return pem.status();
  return grpc::CreateCustomChannel(upstream, tls::ClientCredentials(*std::move(pem)), arguments);
}

Forwarder::Forwarder(Outbox* outbox, std::shared_ptr<grpc::Channel> channel,
                     ForwarderOptions options)
    : outbox_(outbox),
      channel_(std::move(channel)),
      stub_(v1::Collector::NewStub(channel_)),
      options_(options) {}

Forwarder::~Forwarder() { Stop(); }

void Forwarder::Start() {
  absl::MutexLock lock(&mu_);
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Forwarder::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void Forwarder::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

bool Forwarder::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void Forwarder::Run() {
  absl::Duration backoff = options_.retry_min;
  bool failing = false;
  while (true) {
    const absl::Status status = Pass();
    if (status.ok()) {
      if (failing) LogInfo("forwarding: the aggregator takes batches again");
      failing = false;
      backoff = options_.retry_min;
    } else if (!failing) {
      LogWarning("forwarding: ", status.message(), " (retrying; batches wait in the outbox)");
      failing = true;
    }
    absl::MutexLock lock(&mu_);
    const auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || woken_; };
    // After a failure only Stop cuts the wait short: a put must not turn backoff into a spin.
    if (failing) {
      mu_.AwaitWithTimeout(absl::Condition(&stop_), backoff);
      backoff = std::min(backoff * 2, options_.retry_max);
    } else {
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.idle_poll);
    }
    if (stop_) return;
    woken_ = false;
  }
}

absl::Status Forwarder::Pass() {
  absl::StatusOr<std::vector<OutboxSession>> sessions = outbox_->SessionsWithWork();
  if (!sessions.ok()) return sessions.status();
  for (const OutboxSession& session : *sessions) {
    if (Stopping()) return absl::OkStatus();
    if (absl::Status s = ForwardSession(session); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(Describe(session.hello), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Forwarder::ForwardSession(const OutboxSession& session) {
  grpc::ClientContext context;
  context.AddMetadata(kForwardedOwnerKey, std::to_string(session.owner_uid));
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(kStreamDeadline));
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::OkStatus();
    in_flight_ = &context;
  }
  absl::Cleanup landed = [this] {
    absl::MutexLock lock(&mu_);
    in_flight_ = nullptr;
  };
  std::unique_ptr<UpstreamStream> stream = stub_->Stream(&context);
  v1::UpMessage up;
  *up.mutable_hello() = session.hello;
  up.mutable_hello()->set_resume_token(session.upstream_token);
  v1::DownMessage down;
  if (!stream->Write(up) || !stream->Read(&down) || !down.has_welcome()) {
    return Finish(session, &context, stream.get());
  }
  uint64_t acked = down.welcome().committed_seq();
  if (absl::Status s = outbox_->Acknowledge(session.id, acked); !s.ok()) return s;
  const absl::Status sent = SendRounds(session, &acked, stream.get());
  if (!sent.ok() && !absl::IsUnavailable(sent)) return sent;
  return Finish(session, &context, stream.get());
}

absl::Status Forwarder::SendRounds(const OutboxSession& session, uint64_t* acked,
                                   UpstreamStream* stream) {
  for (size_t round = 0; round < options_.rounds_per_stream && !Stopping(); ++round) {
    absl::StatusOr<std::vector<v1::Batch>> batches =
        outbox_->Pending(session.id, *acked, options_.batches_per_round);
    if (!batches.ok()) return batches.status();
    if (batches->empty()) return absl::OkStatus();
    v1::UpMessage up;
    for (v1::Batch& batch : *batches) {
      *up.mutable_batch() = std::move(batch);
      if (!stream->Write(up)) return absl::UnavailableError("the stream broke");
    }
    const uint64_t last = up.batch().seq();
    v1::DownMessage down;
    while (*acked < last) {
      if (!stream->Read(&down)) return absl::UnavailableError("the stream broke");
      if (!down.has_ack()) continue;  // Controls are for producers: a forwarded session has none
      *acked = std::max(*acked, down.ack().committed_seq());
      if (absl::Status s = outbox_->Acknowledge(session.id, *acked); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Forwarder::Finish(const OutboxSession& session, grpc::ClientContext* context,
                               UpstreamStream* stream) {
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) return FromGrpc(status);
  // Refused for good: resending it would be refused again and hold up every later batch.
  const auto& trailers = context->GetServerTrailingMetadata();
  const auto it = trailers.find(kRejectedSeqKey);
  uint64_t seq = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &seq)) {
    return FromGrpc(status);
  }
  LogError("forwarding: the aggregator refused batch ", seq, " of ", Describe(session.hello), ": ",
           status.error_message(), " (dropped from the outbox and counted)");
  return outbox_->DropRefused(session.id, seq);
}

CollectorService::CommittedHook OutboxFiller(Outbox* outbox, Forwarder* forwarder, Catalog* catalog,
                                             uid_t daemon_uid) {
  auto failing = std::make_shared<std::atomic<bool>>(false);
  return [=](const v1::SessionHello& hello, const v1::Batch& batch) {
    const auto owner = [&]() -> absl::StatusOr<uint32_t> {
      absl::StatusOr<std::optional<uint32_t>> uid = catalog->JobOwner(hello.job_id(), daemon_uid);
      if (!uid.ok()) return uid.status();
      return uid->value_or(daemon_uid);
    };
    const absl::Status put = outbox->Put(hello, batch, owner);
    if (!put.ok() && !failing->exchange(true)) LogError("forwarding: ", put.message());
    if (put.ok() && failing->exchange(false)) LogInfo("forwarding: the outbox takes batches again");
    forwarder->Wake();
  };
}

}  // namespace flopscope::daemon::forwarding
