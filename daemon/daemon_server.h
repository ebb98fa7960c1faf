#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/catalog.h"
#include "daemon/collector_service.h"
#include "daemon/daemon_options.h"
#include "daemon/data_dir_lock.h"
#include "daemon/profiling_service.h"
#include "daemon/query_service.h"
#include "daemon/session_registry.h"
#include "daemon/store_registry.h"

namespace flopscope::daemon {

// The whole daemon in-process: catalog, stores, the Collector, Query and Profiling services on a
// unix socket (mode 0660) and optionally loopback TCP. main() runs one; tests and bench/ start
// their own on a temporary socket:
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
  // Opens the read connections of recently seen rank files in the background
  // (QueryService::WarmRecentJobs); Shutdown stops and joins it before closing anything.
  void StartWarmingReaders();

  const DaemonOptions options_;
  std::string tcp_target_;
  std::unique_ptr<DataDirLock> lock_;  // held from Start to the end of Shutdown
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StoreRegistry> stores_;
  std::unique_ptr<SessionRegistry> sessions_;
  std::unique_ptr<CollectorService> collector_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<ProfilingService> profiling_;
  absl::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);  // null once shut down
  std::atomic<bool> stop_warming_{false};
  std::thread warmer_;
};

}  // namespace flopscope::daemon
