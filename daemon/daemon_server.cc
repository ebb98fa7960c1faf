#include "daemon/daemon_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/version.h"
#include "daemon/catalog_rebuild.h"
#include "daemon/damaged_files.h"
#include "daemon/data_dir_lock.h"
#include "daemon/data_layout.h"
#include "daemon/logger.h"
#include "daemon/socket_file.h"

namespace flopscope::daemon {

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(const DaemonOptions& options) {
  if (options.data_dir.empty() || options.socket_path.empty()) {
    return absl::InvalidArgumentError("DaemonServer needs a data directory and a socket path");
  }
  std::unique_ptr<DaemonServer> daemon(new DaemonServer(options));
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
  daemon->stores_ = std::make_unique<StoreRegistry>(options.data_dir);
  daemon->sessions_ = std::make_unique<SessionRegistry>();
  daemon->collector_ = std::make_unique<CollectorService>(
      daemon->stores_.get(), daemon->catalog_.get(), daemon->sessions_.get());
  daemon->query_ = std::make_unique<QueryService>(options.data_dir, daemon->catalog_.get());
  QueryService* query = daemon->query_.get();
  daemon->collector_->SetConnectedHook(
      [query](const std::string& job_id, int32_t rank) { query->PrepareReader(job_id, rank); });
  daemon->profiling_ =
      std::make_unique<ProfilingService>(daemon->catalog_.get(), daemon->sessions_.get());
  if (absl::Status s = daemon->Listen(); !s.ok()) return s;
  daemon->StartWarmingReaders();
  LogUnprefixed(LogLevel::kInfo,
                absl::StrCat("flopscoped ", kVersion, " serving ", daemon->target(),
                             daemon->tcp_target_.empty() ? "" : " and tcp ", daemon->tcp_target_,
                             " data ", options.data_dir));
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
  grpc::ServerBuilder builder;
  builder.AddListeningPort(target(), grpc::InsecureServerCredentials());
  int tcp_port = 0;
  if (!options_.tcp_address.empty()) {
    builder.AddListeningPort(options_.tcp_address, grpc::InsecureServerCredentials(), &tcp_port);
  }
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.RegisterService(collector_.get());
  builder.RegisterService(query_.get());
  builder.RegisterService(profiling_.get());
  // gRPC creates the socket file inside BuildAndStart with the process umask: narrow it for that
  // call so the socket is never world-accessible, not even for an instant. umask is
  // process-wide; files other threads create meanwhile only come out more private.
  const mode_t previous_umask = umask(0117);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  umask(previous_umask);
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", target(),
        options_.tcp_address.empty() ? "" : absl::StrCat(" and ", options_.tcp_address)));
  }
  if (chmod(options_.socket_path.c_str(), 0660) != 0) {
    LogWarning("cannot set mode 0660 on ", options_.socket_path);
  }
  if (!options_.tcp_address.empty()) {
    const std::string host = options_.tcp_address.substr(0, options_.tcp_address.rfind(':'));
    tcp_target_ = absl::StrCat(host, ":", tcp_port);
  }
  absl::MutexLock lock(&mu_);  // server_ is read by Shutdown, possibly from another thread
  server_ = std::move(server);
  return absl::OkStatus();
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

void DaemonServer::Shutdown() {
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&mu_);  // only one caller gets the server to shut down
    server = std::move(server_);
  }
  if (server == nullptr) return;
  stop_warming_.store(true, std::memory_order_relaxed);
  if (warmer_.joinable()) warmer_.join();  // it reads the catalog, which is closed below
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(options_.drain_timeout));
  server->Wait();
  server.reset();
  // Every handler has returned, so no stream holds a store: all are closed (WAL checkpointed).
  // Closing the catalog last does the same for it.
  catalog_.reset();
  unlink(options_.socket_path.c_str());
  lock_.reset();  // last: the next daemon on this data dir finds every file closed
  LogInfo("stopped; data in ", options_.data_dir);
}

DaemonServer::~DaemonServer() { Shutdown(); }

}  // namespace flopscope::daemon
