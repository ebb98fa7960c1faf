// The node daemon's forwarder: a SessionLink per forwarded session, started and reaped by one
// supervisor thread; the upstream channel; the Collector's hook that fills the outbox.
#include "daemon/forwarding/forwarder.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/tls/grpc_credentials.h"
#include "daemon/base/logger.h"
#include "daemon/metrics/forwarding_metrics.h"

namespace flopscope::daemon::forwarding {

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

Forwarder::Forwarder(Outbox* outbox, std::shared_ptr<grpc::Channel> channel, SessionRegistry* local,
                     ForwarderOptions options)
    : outbox_(outbox),
      channel_(std::move(channel)),
      stub_(v1::Collector::NewStub(channel_)),
      local_(local),
      environment_{outbox, stub_.get(), local, &connected_, options} {}

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
  }
  if (thread_.joinable()) thread_.join();  // no link is started after this
  std::map<SessionKey, std::unique_ptr<SessionLink>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
  }
  for (auto& [key, link] : links) link->Stop();  // outside mu_: each joins its threads
}

void Forwarder::Wake(const v1::SessionHello& hello) {
  absl::MutexLock lock(&mu_);
  const auto it = links_.find(SessionKey{hello.job_id(), hello.rank(), hello.session_id()});
  if (it != links_.end() && !it->second->finished()) {
    it->second->Wake();
  } else {
    woken_ = true;
  }
}

void Forwarder::Run() {
  while (true) {
    Reconcile();
    absl::MutexLock lock(&mu_);
    const auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || woken_; };
    mu_.AwaitWithTimeout(absl::Condition(&wake), environment_.options.idle_poll);
    if (stop_) return;
    woken_ = false;
  }
}

std::vector<OutboxSession> Forwarder::Wanted() {
  std::vector<OutboxSession> wanted;
  absl::Status problem;
  absl::StatusOr<std::vector<OutboxSession>> waiting = outbox_->SessionsWithWork();
  if (waiting.ok()) {
    wanted = *std::move(waiting);
  } else {
    problem = waiting.status();
  }
  std::vector<SessionKey> unlinked;
  {
    absl::MutexLock lock(&mu_);
    for (SessionKey& key : local_->Sessions()) {
      if (!links_.contains(key)) unlinked.push_back(std::move(key));
    }
  }
  // A live session is kept open upstream (for Controls) once it has had a batch here.
  for (const SessionKey& key : unlinked) {
    absl::StatusOr<std::optional<OutboxSession>> found =
        outbox_->Find(key.job_id, key.rank, key.session_id);
    if (!found.ok()) {
      problem = found.status();
    } else if (found->has_value()) {
      wanted.push_back(**std::move(found));
    }
  }
  absl::MutexLock lock(&mu_);
  if (!problem.ok() && !failing_) LogError("forwarding: ", problem.message());
  failing_ = !problem.ok();
  return wanted;
}

void Forwarder::Reconcile() {
  std::vector<OutboxSession> wanted = Wanted();
  std::vector<std::unique_ptr<SessionLink>> ended;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    for (auto it = links_.begin(); it != links_.end();) {
      if (it->second->finished()) {
        ended.push_back(std::move(it->second));
        it = links_.erase(it);
      } else {
        ++it;
      }
    }
    for (OutboxSession& session : wanted) {
      SessionKey key{session.hello.job_id(), session.hello.rank(), session.hello.session_id()};
      if (links_.contains(key)) continue;
      auto link = std::make_unique<SessionLink>(environment_, std::move(session));
      link->Start();
      links_.emplace(std::move(key), std::move(link));
    }
  }
  ended.clear();  // outside mu_: joins threads that have returned already
}

std::string ForwardingMetricsText(Outbox* outbox, const Forwarder& forwarder) {
  absl::StatusOr<OutboxTotals> totals = outbox->Totals();
  if (!totals.ok()) {
    LogWarning("metrics: forwarding outbox: ", totals.status().message());
    return "";
  }
  metrics::ForwardingFigures figures;
  figures.outbox_batches = totals->pending_batches;
  figures.outbox_bytes = totals->pending_bytes;
  figures.dropped_batches = totals->dropped_batches;
  figures.oldest_put_ns = totals->oldest_put_ns;
  figures.streams_connected = forwarder.connected();
  return metrics::ForwardingMetricsText(figures, absl::GetCurrentTimeNanos());
}

IngestPath::CommittedHook OutboxFiller(Outbox* outbox, Forwarder* forwarder, Catalog* catalog,
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
    forwarder->Wake(hello);
  };
}

}  // namespace flopscope::daemon::forwarding
