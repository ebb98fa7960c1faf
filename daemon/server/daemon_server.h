#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/access/access_policy.h"
#include "daemon/access/peer_limits.h"
#include "daemon/access/unix_acceptor.h"
#include "daemon/catalog/catalog.h"
#include "daemon/control/profiling_service.h"
#include "daemon/forwarding/forwarder.h"
#include "daemon/forwarding/outbox.h"
#include "daemon/ingest/collector_service.h"
#include "daemon/ingest/ingest_path.h"
#include "daemon/ingest/session_registry.h"
#include "daemon/ingest/spool_collector.h"
#include "daemon/ingest/stream_watchdog.h"
#include "daemon/metrics/metrics_endpoint.h"
#include "daemon/metrics/metrics_registry.h"
#include "daemon/query/query_service.h"
#include "daemon/retention/job_pruner.h"
#include "daemon/server/daemon_options.h"
#include "daemon/server/data_dir_lock.h"
#include "daemon/server/malloc_settings.h"
#include "daemon/store/store_registry.h"

namespace flopscope::daemon {

// The whole daemon in-process: catalog, stores, the Collector, Query and Profiling services on a
// unix socket (mode 0666; each call is authorised from its peer's uid:
// daemon/access/access_policy.h) and optionally TCP: mutual TLS (the client certificate's subject
// is the caller: daemon/access/tls_identity.h) or plain on loopback (no identity, so no job).
// main() runs one; tests and bench/ start their own on a temporary socket:
//   auto server = DaemonServer::Start(options);   // options.data_dir, options.socket_path
//   grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials());
class DaemonServer {
 public:
  // `options` must be resolved (ResolveDaemonOptions, or data_dir and socket_path set).
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const DaemonOptions& options);
  ~DaemonServer();

  // Stops accepting, lets open streams finish for options.drain_timeout then cancels them,
  // closes every store and the catalog (checkpointing their WAL) and removes the socket.
  // Idempotent; safe from any thread but a gRPC handler's.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // "unix:/path/to.sock": what a client passes to grpc::CreateChannel.
  std::string target() const { return "unix:" + options_.socket_path; }
  // "127.0.0.1:<port>" (the port picked when 0 was asked), or "" without --tcp.
  const std::string& tcp_target() const { return tcp_target_; }
  const DaemonOptions& options() const { return options_; }
  QueryService& query_service() { return *query_; }
  SessionRegistry& sessions() { return *sessions_; }

 private:
  explicit DaemonServer(DaemonOptions options) : options_(std::move(options)) {}
  // Opens (or creates) the catalog; a new one lists the rank files already there.
  absl::Status OpenCatalog();
  absl::Status Listen();
  // --tcp's: mutual TLS from the --tls-* files (read and checked here), else plain.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials() const;
  // Opens the read connections of recently seen rank files in the background
  // (QueryService::WarmRecentJobs); Shutdown stops and joins it before closing anything.
  void StartWarmingReaders();
  // --collect-spools: the collector of orphaned spools, told of every stream's end and asked by
  // the query side what waits; Start runs its passes (one now, then one every period).
  void MakeSpoolCollector();
  // --metrics: the endpoint, once the services it reports on are serving.
  absl::Status StartMetrics();
  // --upstream: the outbox, the forwarding thread and the Collector's hook that fills the outbox.
  absl::Status StartForwarding();
  // --upstream-drain-s: waits (up to it) until the forwarder has emptied the outbox.
  void DrainOutbox();
  // The job deleter (`flopscope prune`), after it finished any prune a crash interrupted; with
  // --max-disk, its budget pass thread.
  void StartPruner();

  DaemonOptions options_;  // as given, with max_threads resolved by Start
  std::string tcp_target_;
  std::unique_ptr<DataDirLock> lock_;  // held from Start to the end of Shutdown
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StoreRegistry> stores_;
  std::unique_ptr<SessionRegistry> sessions_;
  std::unique_ptr<metrics::MetricsRegistry> metrics_;  // null without --metrics; before collector_
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  // The one path into the stores, of the Collector's streams and of orphaned spools alike.
  std::unique_ptr<IngestPath> ingest_;
  std::unique_ptr<CollectorService> collector_;
  std::unique_ptr<QueryService> query_;
  // Deletes jobs for Query.PruneJobs and --max-disk; stopped by Shutdown before the stores.
  std::unique_ptr<JobPruner> pruner_;
  std::unique_ptr<ProfilingService> profiling_;
  std::unique_ptr<PeerRegistry> peers_;  // who is on each accepted unix connection
  std::unique_ptr<PeerLimits> limits_;   // how much of the daemon one peer may hold
  std::unique_ptr<AccessControl> access_;
  // Ends silent collector streams; outlives the server (its handlers hold watches).
  std::unique_ptr<StreamWatchdog> watchdog_;
  std::unique_ptr<UnixAcceptor> acceptor_;
  // --upstream (null without): stopped by Shutdown once no stream can put in the outbox.
  std::unique_ptr<forwarding::Outbox> outbox_;
  std::unique_ptr<forwarding::Forwarder> forwarder_;
  // Delivers orphaned spool files (--collect-spools); stopped by Shutdown before the stores.
  // Stopped by Shutdown before the server, destroyed with the daemon (a stream's end nudges it).
  std::unique_ptr<SpoolCollector> spool_collector_;
  absl::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);  // null once shut down
  std::atomic<bool> stop_warming_{false};
  std::thread warmer_;
  std::unique_ptr<FreedMemoryTrimmer> trimmer_;  // from Start to the end
};

}  // namespace flopscope::daemon
