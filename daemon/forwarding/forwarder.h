#pragma once

// The node daemon's forwarding (flopscoped --upstream; docs/architecture.md, "Forwarding"): what
// waits in the Outbox goes to the aggregator over the ordinary Collector protocol, one long-lived
// stream per producer session (daemon/forwarding/session_link.h): the session's hello (with the
// resume token the outbox drew for it upstream, and the job's owner in the stream's metadata),
// then its batches in seq order as they are put; each Ack moves the session's watermark and
// empties the outbox up to it. An unreachable aggregator is retried with backoff; nothing is
// lost meanwhile.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tls/tls_files.h"
#include "daemon/access/access_policy.h"
#include "daemon/catalog/catalog.h"
#include "daemon/forwarding/outbox.h"
#include "daemon/forwarding/session_link.h"
#include "daemon/ingest/collector_service.h"
#include "daemon/ingest/ingest_path.h"
#include "daemon/ingest/session_registry.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon::forwarding {

// The channel to `upstream`: "unix:/path" (the aggregator's socket on this host: its access
// model is the kernel's uid), or HOST:PORT over mutual TLS with `tls` (this node daemon's
// certificate, the CA the aggregator's must carry). HOST:PORT without TLS is refused: plain TCP
// carries no identity, so the aggregator would let it write nothing.
absl::StatusOr<std::shared_ptr<grpc::Channel>> UpstreamChannel(const std::string& upstream,
                                                               const tls::TlsFilePaths& tls);

// The forwarder: a supervisor thread that keeps one SessionLink (a long-lived stream upstream)
// per session that is live on this node or has batches waiting, starts a link when a session
// appears, and reaps links whose session is over and acknowledged.
class Forwarder {
 public:
  // `local`: this node's live producer streams (sessions kept open upstream, Controls relayed).
  Forwarder(Outbox* outbox, std::shared_ptr<grpc::Channel> channel, SessionRegistry* local,
            ForwarderOptions options);
  ~Forwarder();  // Stop()

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the supervisor, then every link (their streams cancelled); what was not acknowledged
  // stays in the outbox for the next start.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // A batch of `hello`'s session was put in the outbox: its link sends it now (a session without
  // a link gets one now rather than at the next poll).
  void Wake(const v1::SessionHello& hello) ABSL_LOCKS_EXCLUDED(mu_);

  // Streams upstream with their Welcome (flopscope_forward_streams_connected).
  int connected() const { return connected_.load(); }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the links that are missing and reaps the finished ones.
  void Reconcile() ABSL_LOCKS_EXCLUDED(mu_);
  // The sessions that need a link: batches waiting, or live here with an outbox row.
  std::vector<OutboxSession> Wanted() ABSL_LOCKS_EXCLUDED(mu_);

  Outbox* const outbox_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> stub_;
  SessionRegistry* const local_;
  std::atomic<int> connected_{0};
  const LinkEnvironment environment_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;  // the outbox could not be read: logged once
  std::map<SessionKey, std::unique_ptr<SessionLink>> links_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The forwarding families of /metrics (daemon/metrics/forwarding_metrics.h) as they stand now;
// empty when the outbox cannot be read (logged).
std::string ForwardingMetricsText(Outbox* outbox, const Forwarder& forwarder);

// The ingest path's hook (IngestPath::SetCommittedHook) of a node daemon: puts each
// committed batch in `outbox` (the job's owner read from `catalog` when its session is new
// there) and wakes `forwarder`. A batch the outbox cannot take is counted there and logged (once
// per run of failures): it stays on this node only.
IngestPath::CommittedHook OutboxFiller(Outbox* outbox, Forwarder* forwarder, Catalog* catalog,
                                       uid_t daemon_uid);

}  // namespace flopscope::daemon::forwarding
