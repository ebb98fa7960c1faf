#pragma once

// The node daemon's forwarding thread (flopscoped --upstream; docs/architecture.md,
// "Forwarding"): it replays what waits in the Outbox to the aggregator over the ordinary
// Collector protocol, one stream per producer session: the session's hello (with the resume
// token the outbox drew for it upstream, and the job's owner in the stream's metadata), then its
// waiting batches in seq order; each Ack moves the session's watermark and empties the outbox up
// to it. An unreachable aggregator is retried with backoff; nothing is lost meanwhile.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/tls/tls_files.h"
#include "daemon/access_policy.h"
#include "daemon/catalog.h"
#include "daemon/collector_service.h"
#include "daemon/forwarding/outbox.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon::forwarding {

// The channel to `upstream`: "unix:/path" (the aggregator's socket on this host: its access
// model is the kernel's uid), or HOST:PORT over mutual TLS with `tls` (this node daemon's
// certificate, the CA the aggregator's must carry). HOST:PORT without TLS is refused: plain TCP
// carries no identity, so the aggregator would let it write nothing.
absl::StatusOr<std::shared_ptr<grpc::Channel>> UpstreamChannel(const std::string& upstream,
                                                               const tls::TlsFilePaths& tls);

struct ForwarderOptions {
  absl::Duration retry_min = absl::Milliseconds(100);  // first wait after a failure, doubled
  absl::Duration retry_max = absl::Seconds(5);
  absl::Duration idle_poll = absl::Seconds(1);  // a pass at least this often
  size_t batches_per_round = 256;               // sent before waiting for their acks
  size_t rounds_per_stream = 8;  // then the stream ends, so other sessions get their turn
};

class Forwarder {
 public:
  Forwarder(Outbox* outbox, std::shared_ptr<grpc::Channel> channel, ForwarderOptions options);
  ~Forwarder();  // Stop()

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the stream in flight and joins the thread; what was not acknowledged stays in the
  // outbox for the next start.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Something was put in the outbox: forward it now rather than at the next poll.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Forwards every session with work; the first failure ends the pass.
  absl::Status Pass() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ForwardSession(const OutboxSession& session) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends the session's waiting batches after `*acked` and reads acks up to the last one.
  absl::Status SendRounds(const OutboxSession& session, uint64_t* acked,
                          grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>* stream);
  // The stream's end: a batch the aggregator refused for good is dropped (and counted).
  absl::Status Finish(const OutboxSession& session, grpc::ClientContext* context,
                      grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>* stream);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);

  Outbox* const outbox_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> stub_;
  const ForwarderOptions options_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;  // cancelled by Stop
  std::thread thread_;
};

// The Collector's hook (CollectorService::SetCommittedHook) of a node daemon: puts each
// committed batch in `outbox` (the job's owner read from `catalog` when its session is new
// there) and wakes `forwarder`. A batch the outbox cannot take is counted there and logged (once
// per run of failures): it stays on this node only.
CollectorService::CommittedHook OutboxFiller(Outbox* outbox, Forwarder* forwarder, Catalog* catalog,
                                             uid_t daemon_uid);

}  // namespace flopscope::daemon::forwarding
