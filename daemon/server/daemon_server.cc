#include "daemon/server/daemon_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/endpoint.h"
#include "common/spool_dir.h"
#include "common/tls/grpc_credentials.h"
#include "common/version.h"
#include "daemon/base/logger.h"
#include "daemon/catalog/catalog_rebuild.h"
#include "daemon/server/data_dir_lock.h"
#include "daemon/server/open_file_limit.h"
#include "daemon/server/socket_file.h"
#include "daemon/store/damaged_files.h"
#include "daemon/store/data_layout.h"

namespace flopscope::daemon {

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(const DaemonOptions& options) {
  if (options.data_dir.empty() || options.socket_path.empty()) {
    return absl::InvalidArgumentError("DaemonServer needs a data directory and a socket path");
  }
  std::unique_ptr<DaemonServer> daemon(new DaemonServer(options));
  if (daemon->options_.max_threads <= 0) daemon->options_.max_threads = DefaultMaxThreads();
  // Before the query side sizes its reader pool from the open-file limit this may raise.
  if (daemon->options_.max_streams <= 0) daemon->options_.max_streams = DefaultMaxStreams();
  // What malloc holds free goes back to the system every few seconds (malloc_settings.h).
  daemon->trimmer_ = std::make_unique<FreedMemoryTrimmer>();
  // The data directory's lock first: a second daemon on it stops here, naming the holder, and
  // touches neither the socket nor a file. A socket still answering once the lock is ours
  // belongs to a daemon of another data directory (the dying holder closed it with the lock).
  if (absl::Status s = EnsureDirectory(options.data_dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<DataDirLock>> lock = DataDirLock::Acquire(options.data_dir);
  if (!lock.ok()) return lock.status();
  daemon->lock_ = *std::move(lock);
  if (absl::Status s = PrepareSocketPath(options.socket_path); !s.ok()) return s;
  // Before anything opens a file for writing: damaged ones are moved aside, never written again.
  QuarantineDamagedFiles(options.data_dir);
  if (absl::Status s = daemon->OpenCatalog(); !s.ok()) return s;
  daemon->stores_ =
      std::make_unique<StoreRegistry>(options.data_dir, FoldPolicy{options.keep_raw_steps});
  daemon->sessions_ = std::make_unique<SessionRegistry>();
  daemon->ingest_ = std::make_unique<IngestPath>(daemon->stores_.get(), daemon->catalog_.get());
  daemon->collector_ = std::make_unique<CollectorService>(
      daemon->ingest_.get(), daemon->catalog_.get(), daemon->sessions_.get());
  if (!options.metrics_address.empty()) {
    daemon->metrics_ = std::make_unique<metrics::MetricsRegistry>(options.metrics_max_ranks);
    daemon->ingest_->SetMetrics(daemon->metrics_.get());
    daemon->collector_->SetMetrics(daemon->metrics_.get());
  }
  daemon->query_ = std::make_unique<QueryService>(options.data_dir, daemon->catalog_.get(),
                                                  static_cast<size_t>(options.report_cache_bytes));
  QueryService* query = daemon->query_.get();
  daemon->ingest_->SetConnectedHook(
      [query](const std::string& job_id, int32_t rank) { query->PrepareReader(job_id, rank); });
  daemon->profiling_ =
      std::make_unique<ProfilingService>(daemon->catalog_.get(), daemon->sessions_.get());
  daemon->peers_ = std::make_unique<PeerRegistry>();
  daemon->limits_ = std::make_unique<PeerLimits>(
      PeerLimitOptions{daemon->options_.max_streams, options.max_streams_per_uid,
                       options.max_new_jobs_per_minute, options.max_queries_per_uid});
  daemon->access_ =
      std::make_unique<AccessControl>(daemon->peers_.get(), daemon->catalog_.get(),
                                      MakeAccessRules(options.admin_group), daemon->limits_.get());
  daemon->watchdog_ =
      std::make_unique<StreamWatchdog>(options.hello_timeout, options.stream_idle_timeout);
  daemon->collector_->SetAccessControl(daemon->access_.get());
  daemon->collector_->SetLimits(daemon->limits_.get());
  daemon->collector_->SetWatchdog(daemon->watchdog_.get());
  daemon->query_->SetAccessControl(daemon->access_.get());
  daemon->query_->SetLimits(daemon->limits_.get());
  daemon->profiling_->SetAccessControl(daemon->access_.get());
  if (absl::Status s = daemon->StartForwarding(); !s.ok()) return s;
  daemon->StartPruner();
  daemon->MakeSpoolCollector();  // before the first stream can end and nudge it
  if (absl::Status s = daemon->Listen(); !s.ok()) return s;
  if (absl::Status s = daemon->StartMetrics(); !s.ok()) return s;
  daemon->StartWarmingReaders();
  if (daemon->spool_collector_ != nullptr) {
    daemon->spool_collector_->Start(absl::Seconds(options.spool_period_s));
  }
  LogUnprefixed(LogLevel::kInfo,
                absl::StrCat("flopscoped ", kVersion, " serving ", daemon->target(),
                             daemon->tcp_target_.empty() ? ""
                             : options.tls.any()         ? " and mutual TLS on "
                                                         : " and plain tcp ",
                             daemon->tcp_target_, " data ", options.data_dir));
  return daemon;
}

absl::Status DaemonServer::OpenCatalog() {
  const std::string path = CatalogPath(options_.data_dir);
  const bool fresh = !std::filesystem::exists(path);
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(path);
  if (!catalog.ok()) return catalog.status();
  catalog_ = *std::move(catalog);
  // A new catalog beside old rank files (the old one was damaged or deleted): list them again.
  if (fresh) {
    const size_t listed = RelistRankFiles(options_.data_dir, catalog_.get());
    if (listed > 0) LogWarning("new catalog ", path, ": listed ", listed, " existing rank files");
  }
  return absl::OkStatus();
}

absl::Status DaemonServer::Listen() {
  // The standard grpc.health.v1.Health service ("" is SERVING while the server runs), for
  // probes and load balancers (deploy/kubernetes). Process-wide, so set before the builder.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // The unix socket is accepted by UnixAcceptor, which hands each connection to this server
  // with its peer's credentials registered; gRPC itself listens only on --tcp.
  int tcp_port = 0;
  if (!options_.tcp_address.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = TcpCredentials();
    if (!credentials.ok()) return credentials.status();
    builder.AddListeningPort(options_.tcp_address, *credentials, &tcp_port);
  }
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  // Threads below the task limit (reliability campaign row 5a′): streams hold none (the
  // Collector's callback API), so queries always find one whatever the streams do.
  grpc::ResourceQuota quota("flopscoped");
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(collector_.get());
  builder.RegisterService(query_.get());
  builder.RegisterService(profiling_.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", target(),
        options_.tcp_address.empty() ? "" : absl::StrCat(" and ", options_.tcp_address)));
  }
  absl::StatusOr<std::unique_ptr<UnixAcceptor>> acceptor =
      UnixAcceptor::Start(options_.socket_path, server.get(), peers_.get());
  if (!acceptor.ok()) {
    server->Shutdown();
    return acceptor.status();
  }
  acceptor_ = *std::move(acceptor);
  if (!access_->rules().admin_gid && !options_.admin_group.empty()) {
    LogInfo("no group '", options_.admin_group, "' on this host: no admin group");
  }
  if (!options_.tcp_address.empty()) {
    const std::string host = options_.tcp_address.substr(0, options_.tcp_address.rfind(':'));
    tcp_target_ = absl::StrCat(host, ":", tcp_port);
  }
  absl::MutexLock lock(&mu_);  // server_ is read by Shutdown, possibly from another thread
  server_ = std::move(server);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> DaemonServer::TcpCredentials() const {
  if (!options_.tls.any()) return grpc::InsecureServerCredentials();
  absl::StatusOr<tls::TlsPem> pem = tls::LoadTlsFiles(options_.tls);
  if (!pem.ok()) return pem.status();
  return tls::MutualTlsServerCredentials(*pem);
}

absl::Status DaemonServer::StartMetrics() {
  if (metrics_ == nullptr) return absl::OkStatus();
  metrics::MetricsRegistry* registry = metrics_.get();
  // A node daemon adds its forwarding figures (Shutdown stops the endpoint before the forwarder).
  forwarding::Outbox* outbox = outbox_.get();
  const forwarding::Forwarder* forwarder = forwarder_.get();
  absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> endpoint =
      metrics::MetricsEndpoint::Start(options_.metrics_address, [registry, outbox, forwarder] {
        std::string text = registry->Render();
        if (forwarder != nullptr) text += forwarding::ForwardingMetricsText(outbox, *forwarder);
        return text;
      });
  if (!endpoint.ok()) return endpoint.status();
  metrics_endpoint_ = *std::move(endpoint);
  LogInfo("metrics on http://", metrics_endpoint_->address(), metrics::kMetricsPath);
  return absl::OkStatus();
}

absl::Status DaemonServer::StartForwarding() {
  if (options_.upstream.empty()) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      forwarding::UpstreamChannel(options_.upstream, options_.tls);
  if (!channel.ok()) return channel.status();
  absl::StatusOr<std::unique_ptr<forwarding::Outbox>> outbox = forwarding::Outbox::Open(
      forwarding::OutboxPath(options_.data_dir), options_.outbox_max_bytes);
  if (!outbox.ok()) return outbox.status();
  outbox_ = *std::move(outbox);
  forwarder_ = std::make_unique<forwarding::Forwarder>(
      outbox_.get(), *std::move(channel), sessions_.get(), forwarding::ForwarderOptions{});
  ingest_->SetCommittedHook(forwarding::OutboxFiller(outbox_.get(), forwarder_.get(),
                                                     catalog_.get(), access_->rules().daemon_uid));
  forwarder_->Start();
  LogInfo("forwarding every committed batch to ", options_.upstream);
  return absl::OkStatus();
}

void DaemonServer::StartPruner() {
  QueryService* query = query_.get();
  pruner_ = std::make_unique<JobPruner>(
      options_.data_dir, catalog_.get(), stores_.get(),
      [query](const std::string& directory) { query->DropReaders(directory); });
  if (metrics_ != nullptr) {
    metrics::MetricsRegistry* registry = metrics_.get();
    pruner_->SetPrunedHook([registry](uint64_t bytes) { registry->OnJobPruned(bytes); });
  }
  // Before serving: no report can meet a half-pruned job.
  pruner_->RecoverInterrupted();
  query_->SetPruner(pruner_.get());
  if (options_.max_disk_bytes == 0 && options_.max_disk_per_user_bytes == 0) return;
  BudgetPolicy policy{options_.max_disk_bytes, options_.max_disk_per_user_bytes,
                      absl::ToInt64Nanoseconds(absl::Seconds(options_.prune_grace_s))};
  LogInfo("disk budget: the jobs' files are kept under ", policy.max_bytes,
          " bytes by each user's share (--max-disk; 0: none), a user's under ",
          policy.max_bytes_per_user, " (--max-disk-per-user; 0: none), no job deleted within ",
          options_.prune_grace_s, " s of its end, checked every ", options_.disk_check_period_s,
          " s");
  JobPruner* pruner = pruner_.get();
  ingest_->SetAdmitHook(
      [pruner](const v1::SessionHello& hello) { return pruner->CheckWriter(hello.job_id()); });
  pruner_->Start(policy, absl::Seconds(options_.disk_check_period_s));
}

void DaemonServer::StartWarmingReaders() {
  warmer_ = std::thread([this] {
    const absl::Time start = absl::Now();
    const size_t opened = query_->WarmRecentJobs(stop_warming_);
    if (opened > 0) {
      LogInfo("opened ", opened, " rank files for reports in ",
              absl::FormatDuration(absl::Now() - start));
    }
  });
}

void DaemonServer::MakeSpoolCollector() {
  if (options_.spool_patterns.empty()) return;
  AccessControl* access = access_.get();
  // A spool file speaks for its owner uid (the file system vouches for it, not the file).
  auto may_write = [access](uid_t uid, const std::string& job_id) {
    PeerIdentity owner;
    owner.uid = uid;
    owner.gid = static_cast<gid_t>(-1);           // no group: an admin group cannot apply
    return access->ClaimForWrite(owner, job_id);  // the id it goes to: its own or kept apart
  };
  // Only the spools aimed at this daemon, or at one the operator names (common/spool_dir.h).
  SpoolCollector::Destinations destinations;
  destinations.names.push_back(SpoolDestinationName(options_.socket_path));
  if (!options_.tcp_address.empty()) {
    destinations.names.push_back(SpoolDestinationName(options_.tcp_address));
  }
  for (const std::string& address : options_.spool_destinations) {
    if (address == "*") {
      destinations.any = true;
      continue;
    }
    destinations.names.push_back(SpoolDestinationName(GrpcTarget(address)));
  }
  LogInfo("collecting orphaned spools in ", absl::StrJoin(options_.spool_patterns, ","),
          destinations.any ? " for every daemon" : ", folders ",
          destinations.any ? "" : absl::StrJoin(destinations.names, ","));
  spool_collector_ = std::make_unique<SpoolCollector>(
      options_.spool_patterns, std::move(destinations), ingest_.get(), std::move(may_write));
  SpoolCollector* collector = spool_collector_.get();  // lives as long as the daemon
  collector_->SetEndedHook([collector] { collector->Nudge(); });
  query_->SetSpooledRecords([collector] { return collector->WaitingRecords(); });
}

void DaemonServer::Shutdown() {
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&mu_);  // only one caller gets the server to shut down
    server = std::move(server_);
  }
  if (server == nullptr) return;
  acceptor_->Stop();  // no new connection is handed to a server shutting down
  // It writes to the stores and the catalog, closed below. Stopped, not destroyed: a stream
  // still ending may nudge it.
  if (spool_collector_ != nullptr) spool_collector_->Stop();
  // No scrape in flight from here on. Up to 2 s: civetweb's listener polls in 2 s steps.
  metrics_endpoint_.reset();
  stop_warming_.store(true, std::memory_order_relaxed);
  if (warmer_.joinable()) warmer_.join();  // it reads the catalog, which is closed below
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(options_.drain_timeout));
  server->Wait();
  server.reset();
  // No PruneJobs call is in flight any more; the budget pass may be, and is joined here.
  pruner_.reset();
  // No stream puts in the outbox any more; what waits there is sent after the next start.
  DrainOutbox();
  forwarder_.reset();
  outbox_.reset();
  // Every handler has returned, so no stream holds a store: all are closed (WAL checkpointed).
  // Closing the catalog last does the same for it.
  catalog_.reset();
  unlink(options_.socket_path.c_str());
  lock_.reset();  // last: the next daemon on this data dir finds every file closed
  LogInfo("stopped; data in ", options_.data_dir);
}

void DaemonServer::DrainOutbox() {
  if (outbox_ == nullptr || options_.upstream_drain_s <= 0) return;
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.upstream_drain_s);
  int64_t waiting = 0;
  for (;;) {  // the forwarder runs on; it polls the outbox at least every second
    absl::StatusOr<forwarding::OutboxTotals> totals = outbox_->Totals();
    if (!totals.ok()) {
      LogWarning("cannot read the outbox to drain it: ", totals.status().message());
      return;
    }
    waiting = totals->pending_batches;
    if (waiting == 0 || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (waiting == 0) {
    LogInfo("forwarded every batch to ", options_.upstream);
  } else {
    LogWarning(waiting, " batches still wait for ", options_.upstream, " after ",
               options_.upstream_drain_s, " s (--upstream-drain-s); they stay in ",
               forwarding::OutboxPath(options_.data_dir), " for the next daemon on this data dir");
  }
}

DaemonServer::~DaemonServer() { Shutdown(); }

}  // namespace flopscope::daemon
