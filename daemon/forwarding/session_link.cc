// One forwarded session's long-lived stream upstream: its batches go up as they enter the outbox,
// Acks come down and move the watermark, and Controls from the aggregator are relayed to the
// producer's stream on this node.
#include "daemon/forwarding/session_link.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/access/access_policy.h"
#include "daemon/base/logger.h"
#include "daemon/ingest/collector_service.h"

namespace flopscope::daemon::forwarding {
namespace {

// A relay looks at whether its stream is closing this often while it waits for the producer.
constexpr absl::Duration kRelaySlice = absl::Milliseconds(100);

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string Describe(const v1::SessionHello& hello) {
  return absl::StrCat("job ", hello.job_id(), " rank ", hello.rank(), " session ",
                      hello.session_id());
}

}  // namespace

SessionLink::SessionLink(const LinkEnvironment& environment, OutboxSession session)
    : env_(environment),
      session_(std::move(session)),
      key_{session_.hello.job_id(), session_.hello.rank(), session_.hello.session_id()},
      name_(Describe(session_.hello)) {}

SessionLink::~SessionLink() { Stop(); }

void SessionLink::Start() {
  absl::MutexLock lock(&mu_);
  thread_ = std::thread([this] { Run(); });
}

void SessionLink::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    poked_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void SessionLink::Wake() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
}

bool SessionLink::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

void SessionLink::Run() {
  absl::Duration backoff = env_.options.retry_min;
  while (true) {
    const absl::StatusOr<bool> over = ServeStream();
    absl::MutexLock lock(&mu_);
    if (stop_ || (over.ok() && *over)) break;
    if (over.ok()) {  // a batch refused for good was dropped: go on with the next at once
      backoff = env_.options.retry_min;
      continue;
    }
    if (!failing_) {
      LogWarning("forwarding: ", name_, ": ", over.status().message(),
                 " (retrying; batches wait in the outbox)");
      failing_ = true;
    }
    mu_.AwaitWithTimeout(absl::Condition(&stop_), backoff);
    backoff = std::min(backoff * 2, env_.options.retry_max);
  }
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

absl::StatusOr<bool> SessionLink::ServeStream() {
  grpc::ClientContext context;
  context.AddMetadata(kForwardedOwnerKey, std::to_string(session_.owner_uid));
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    context_ = &context;
    welcomed_ = broken_ = reader_done_ = relays_closed_ = false;
    broken_why_ = absl::OkStatus();
    acked_ = sent_ = 0;
    in_flight_.clear();
  }
  absl::Cleanup forget = [this] {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    if (welcomed_) env_.connected->fetch_sub(1);
  };
  std::unique_ptr<UpstreamStream> stream = env_.stub->Stream(&context);
  {
    absl::MutexLock lock(&write_mu_);
    writes_done_ = false;
  }
  v1::UpMessage up;
  *up.mutable_hello() = session_.hello;
  up.mutable_hello()->set_resume_token(session_.upstream_token);
  const bool hello_sent = WriteUp(stream.get(), up);
  std::thread reader([this, &stream] { ReadLoop(stream.get()); });
  const absl::StatusOr<bool> over =
      hello_sent ? Pump(stream.get()) : absl::UnavailableError("the stream broke at its hello");
  JoinRelays();
  if (over.ok() && *over) {
    absl::MutexLock lock(&write_mu_);
    stream->WritesDone();  // the aggregator ends the stream; the reader sees it
    writes_done_ = true;
  } else {
    absl::MutexLock lock(&mu_);
    if (!reader_done_) context.TryCancel();  // else the aggregator ended it: keep its status
  }
  reader.join();
  return Finish(&context, stream.get(), over);
}

absl::StatusOr<bool> SessionLink::Pump(UpstreamStream* stream) {
  const absl::Time welcome_deadline = absl::Now() + env_.options.stall_timeout;
  bool welcomed = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return absl::CancelledError("stopping");
      if (broken_) return broken_why_;
      welcomed = welcomed_;
      const absl::Time now = absl::Now();
      if (!welcomed && now > welcome_deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("no Welcome within ", absl::FormatDuration(env_.options.stall_timeout)));
      }
      if (!in_flight_.empty() && now - last_progress_ > env_.options.stall_timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            in_flight_.size(), " batches without an acknowledgement for ",
            absl::FormatDuration(env_.options.stall_timeout), ": reopening the stream"));
      }
    }
    if (welcomed) {
      if (absl::Status s = SendWaiting(stream); !s.ok()) return s;
      absl::StatusOr<bool> over = SessionOver();
      if (!over.ok() || *over) return over;
    }
    absl::MutexLock lock(&mu_);
    const auto event = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return poked_; };
    mu_.AwaitWithTimeout(absl::Condition(&event), env_.options.idle_poll);
    poked_ = false;
  }
}

absl::Status SessionLink::SendWaiting(UpstreamStream* stream) {
  while (true) {
    uint64_t after = 0;
    size_t room = 0;
    {
      absl::MutexLock lock(&mu_);
      if (broken_ || stop_) return absl::OkStatus();  // Pump says why
      room = env_.options.window - std::min(env_.options.window, in_flight_.size());
      after = sent_;
    }
    if (room == 0) return absl::OkStatus();
    absl::StatusOr<std::vector<v1::Batch>> batches = env_.outbox->Pending(session_.id, after, room);
    if (!batches.ok()) return batches.status();
    v1::UpMessage up;
    for (v1::Batch& batch : *batches) {
      {
        // Before the write: its Ack may be read before Write returns.
        absl::MutexLock lock(&mu_);
        if (in_flight_.empty()) last_progress_ = absl::Now();
        in_flight_.push_back(batch.seq());
        sent_ = batch.seq();
      }
      *up.mutable_batch() = std::move(batch);
      if (!WriteUp(stream, up)) return absl::OkStatus();  // broken: the reader sees the end
    }
    if (batches->size() < room) return absl::OkStatus();
  }
}

absl::StatusOr<bool> SessionLink::SessionOver() {
  // Live first: the producer's last batch is in the outbox before its stream ends here.
  if (env_.local->IsLive(key_)) return false;
  uint64_t acked = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!in_flight_.empty()) return false;
    acked = acked_;
  }
  absl::StatusOr<std::vector<v1::Batch>> waiting = env_.outbox->Pending(session_.id, acked, 1);
  if (!waiting.ok()) return waiting.status();
  return waiting->empty();
}

void SessionLink::ReadLoop(UpstreamStream* stream) {
  v1::DownMessage down;
  while (stream->Read(&down)) {
    switch (down.msg_case()) {
      case v1::DownMessage::kWelcome:
        OnAcknowledged(down.welcome().committed_seq(), /*welcome=*/true);
        break;
      case v1::DownMessage::kAck:
        OnAcknowledged(down.ack().committed_seq(), /*welcome=*/false);
        break;
      case v1::DownMessage::kControl:
        RelayControl(down.control(), stream);
        break;
      case v1::DownMessage::MSG_NOT_SET:
        break;
    }
  }
  absl::MutexLock lock(&mu_);
  if (!broken_) broken_why_ = absl::UnavailableError("the aggregator ended the stream");
  broken_ = reader_done_ = poked_ = true;
}

void SessionLink::OnAcknowledged(uint64_t committed_seq, bool welcome) {
  if (absl::Status s = env_.outbox->Acknowledge(session_.id, committed_seq); !s.ok()) {
    Broke(s);
    return;
  }
  absl::MutexLock lock(&mu_);
  acked_ = std::max(acked_, committed_seq);
  sent_ = std::max(sent_, acked_);  // a Welcome: the aggregator has these already
  while (!in_flight_.empty() && in_flight_.front() <= acked_) in_flight_.pop_front();
  last_progress_ = absl::Now();
  poked_ = true;
  if (!welcome) return;
  welcomed_ = true;
  env_.connected->fetch_add(1);
  if (failing_) {
    LogInfo("forwarding: ", name_, ": the aggregator takes batches again");
    failing_ = false;
  }
}

void SessionLink::Broke(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (!broken_) broken_why_ = std::move(why);
  broken_ = true;
  poked_ = true;
}

void SessionLink::RelayControl(const v1::Control& control, UpstreamStream* stream) {
  v1::UpMessage up;
  v1::ControlReply& reply = *up.mutable_control_reply();
  reply.set_id(control.id());
  std::vector<Relay> done;
  bool busy = false;
  {
    absl::MutexLock lock(&mu_);
    if (relays_closed_) return;  // the stream is closing: the aggregator's wait ends with it
    for (auto it = relays_.begin(); it != relays_.end();) {
      if (it->done->load()) {
        done.push_back(std::move(*it));
        it = relays_.erase(it);
      } else {
        ++it;
      }
    }
    busy = relays_.size() >= kMaxRelaysPerLink;
  }
  for (Relay& relay : done) relay.thread.join();
  if (control.command_case() == v1::Control::COMMAND_NOT_SET) {
    reply.set_message("the node daemon relays counter windows and flushes only");
  } else if (busy) {
    reply.set_message(absl::StrCat("the node daemon has ", kMaxRelaysPerLink,
                                   " requests to this process waiting already; try again"));
  } else {
    absl::StatusOr<std::shared_ptr<PendingControl>> sent = env_.local->Send(key_, control);
    if (sent.ok()) {
      auto finished = std::make_shared<std::atomic<bool>>(false);
      absl::MutexLock lock(&mu_);
      if (relays_closed_) {  // closed since the check above: nobody would join a relay now
        env_.local->AwaitReply(*sent, absl::InfinitePast()).IgnoreError();  // forgets it
        return;
      }
      relays_.push_back(Relay{
          std::thread([this, id = control.id(), pending = *std::move(sent), stream, finished] {
            AwaitRelayed(id, pending, stream);
            finished->store(true);
          }),
          finished});
      return;
    }
    reply.set_message(absl::StrCat("rank ", key_.rank, " is not connected to its node daemon (",
                                   sent.status().message(), ")"));
  }
  LogInfo("forwarding: control ", control.id(), " for ", name_, " not relayed: ", reply.message());
  WriteUp(stream, up);
}

void SessionLink::AwaitRelayed(uint64_t upstream_id, std::shared_ptr<PendingControl> pending,
                               UpstreamStream* stream) {
  const absl::Time deadline = absl::Now() + env_.options.control_timeout;
  std::optional<absl::StatusOr<v1::ControlReply>> outcome;
  while (!outcome.has_value()) {
    bool closing = false;
    {
      absl::MutexLock lock(&mu_);
      closing = relays_closed_;
    }
    if (closing || absl::Now() >= deadline) {
      // Taken out of the registry's pending set; a reply that came meanwhile still counts.
      outcome = env_.local->AwaitReply(pending, absl::InfinitePast());
      break;
    }
    outcome = pending->WaitUntil(std::min(absl::Now() + kRelaySlice, deadline));
  }
  v1::UpMessage up;
  v1::ControlReply& reply = *up.mutable_control_reply();
  reply.set_id(upstream_id);
  if (outcome->ok()) {
    reply.set_accepted((*outcome)->accepted());
    reply.set_message((*outcome)->message());
  } else {
    reply.set_message(std::string(outcome->status().message()));
  }
  LogInfo("forwarding: relayed control ", upstream_id, " to ", name_, ": ",
          reply.accepted() ? "accepted" : "refused",
          reply.message().empty() ? "" : absl::StrCat(" (", reply.message(), ")"));
  WriteUp(stream, up);
}

void SessionLink::JoinRelays() {
  std::vector<Relay> relays;
  {
    absl::MutexLock lock(&mu_);
    relays_closed_ = true;
    relays.swap(relays_);
  }
  for (Relay& relay : relays) relay.thread.join();
}

bool SessionLink::WriteUp(UpstreamStream* stream, const v1::UpMessage& message) {
  absl::MutexLock lock(&write_mu_);
  return !writes_done_ && stream->Write(message);
}

absl::StatusOr<bool> SessionLink::Finish(grpc::ClientContext* context, UpstreamStream* stream,
                                         const absl::StatusOr<bool>& outcome) {
  const grpc::Status status = stream->Finish();
  if (outcome.ok() && *outcome) return true;  // over, and everything acknowledged
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    // Refused for good: resending it would be refused again and hold up every later batch.
    const auto& trailers = context->GetServerTrailingMetadata();
    const auto it = trailers.find(kRejectedSeqKey);
    uint64_t seq = 0;
    if (it != trailers.end() &&
        absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &seq)) {
      LogError("forwarding: the aggregator refused batch ", seq, " of ", name_, ": ",
               status.error_message(), " (dropped from the outbox and counted)");
      if (absl::Status s = env_.outbox->DropRefused(session_.id, seq); !s.ok()) return s;
      return false;
    }
  }
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    return FromGrpc(status);
  }
  return outcome.ok() ? absl::UnavailableError("the stream ended") : outcome.status();
}

}  // namespace flopscope::daemon::forwarding
