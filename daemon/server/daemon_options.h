#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tls/tls_files.h"
#include "daemon/base/cpu_priority.h"
#include "daemon/base/logger.h"
#include "daemon/metrics/metrics_registry.h"

namespace CLI {
class App;
}  // namespace CLI

namespace flopscope::daemon {

inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

// Ten minutes of steps at a step per second (DESIGN: Storage).
inline constexpr int64_t kDefaultKeepRawSteps = 600;

// How flopscoped runs; main() fills it from the command line, tests build it directly.
struct DaemonOptions {
  std::string data_dir;     // empty: DefaultDataDir()
  std::string socket_path;  // empty: flopscope::DefaultSocketPath()
  // HOST:PORT, empty for none: with `tls` any address (mutual TLS), else loopback only and
  // only with insecure_loopback_tcp (no identity: health checks only).
  std::string tcp_address;
  bool insecure_loopback_tcp = false;
  // --tls-cert/--tls-key/--tls-ca: mutual TLS on tcp_address; a client's certificate must be
  // signed by `ca` and its subject is its identity (daemon/access/tls_identity.h). Empty: plain
  // TCP.
  tls::TlsFilePaths tls;
  // Its members may read, write and profile every job (docs/architecture.md, "Access model");
  // "" or a group this host lacks: none.
  std::string admin_group = "flopscope";
  LogLevel log_level = LogLevel::kInfo;
  int max_receive_message_bytes = kMaxReceiveMessageBytes;
  // How long SIGTERM waits for open streams before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(3);
  // Bounded per peer (daemon/access/peer_limits.h, docs/design/access.md). --max-threads: the
  // most threads gRPC may run the calls on; 0 (the default) resolves to 4096, or 3/4 of a lower
  // task limit (the cgroup's pids.max, RLIMIT_NPROC). Streams hold no thread (the Collector's
  // callback API), so this bounds the queries and the reactions.
  int max_threads = 0;
  // --max-streams: the most Collector streams at once; 0 (the default) resolves to what the
  // open-file limit affords (open_file_limit.h).
  int max_streams = 0;
  int max_streams_per_uid = 256;
  int max_new_jobs_per_minute = 120;  // 0: no limit
  int max_queries_per_uid = 32;       // queries one user may have in flight (root: no limit)
  // A stream must send its hello within this, then a message at least every stream_idle_timeout
  // (daemon/ingest/stream_watchdog.h).
  absl::Duration hello_timeout = absl::Seconds(10);
  absl::Duration stream_idle_timeout = absl::Minutes(30);
  // --metrics [HOST:]PORT: /metrics for Prometheus there (civetweb's "HOST:PORT" once resolved,
  // loopback when no host is given); empty: no endpoint. At most metrics_max_ranks ranks keep
  // series (daemon/metrics/metrics_registry.h).
  std::string metrics_address;
  size_t metrics_max_ranks = metrics::kDefaultMaxRanks;
  // --collect-spools: directories (shell patterns) whose orphaned spool files the daemon
  // delivers at start and every spool_period (daemon/ingest/spool_collector.h); empty: none.
  std::vector<std::string> spool_patterns = {"/var/tmp/flopscope-spool-*",
                                             "/run/user/*/flopscope-spool"};
  double spool_period_s = 60;
  // --collect-spools-for: the daemon addresses (besides this daemon's own socket and --tcp)
  // whose spools it delivers too, or "*" for every one; a spool is otherwise only delivered to
  // the daemon its session was aimed at (common/spool_dir.h).
  std::vector<std::string> spool_destinations;
  // --keep-raw-steps: steps of a rank kept raw; older ones are folded
  // (daemon/store/step_folding.h). 0: never fold.
  int64_t keep_raw_steps = kDefaultKeepRawSteps;
  // --max-disk SIZE: the jobs' files are kept under this many bytes by deleting the oldest
  // finished jobs, checked every disk_check_period_s (daemon/retention/job_pruner.h); 0: no budget.
  // max_disk is the text given; ResolveDaemonOptions parses it into max_disk_bytes.
  std::string max_disk;
  uint64_t max_disk_bytes = 0;
  double disk_check_period_s = 60;
  // --max-disk-per-user SIZE: a user whose jobs take this much is refused new records (nothing
  // deleted); parsed into max_disk_per_user_bytes; 0: no quota. --prune-grace-s: a job that
  // ended less than this ago is never deleted by the budget (daemon/retention/disk_budget.h).
  std::string max_disk_per_user;
  uint64_t max_disk_per_user_bytes = 0;
  double prune_grace_s = 300;
  // --upstream: the aggregator this node daemon forwards every committed batch to, "unix:/path"
  // or HOST:PORT over mutual TLS with the --tls-* files; empty: none (docs/architecture.md,
  // "Forwarding"). --outbox-max-mb: batches waiting for it before new ones stay here only.
  std::string upstream;
  int64_t outbox_max_bytes = int64_t{1} << 30;
  // --upstream-drain-s: how long SIGTERM keeps forwarding until the outbox is empty, for a
  // daemon that never starts again on its data dir (a Slurm job's); 0: not at all.
  double upstream_drain_s = 0;
  // --report-cache-mb: memory for the rank files' range events kept between reports
  // (daemon/query/range_row_cache.h); 0: every report reads them from the files.
  int64_t report_cache_bytes = int64_t{512} << 20;
  // --nice: the CPU priority the daemon asks for over the jobs it watches
  // (daemon/base/cpu_priority.h).
  int nice = kDefaultNice;
};

// The threads gRPC may use when --max-threads is not given: 4096, or 3/4 of the task limit the
// daemon runs under (its cgroup's pids.max, RLIMIT_NPROC for a non-root user) when that is lower,
// so that threads run out before tasks do (reliability campaign row 5a′). At least 32.
int DefaultMaxThreads();

// $FLOPSCOPE_DATA_DIR, else /var/lib/flopscope when it is (or can be made) writable, else
// $XDG_DATA_HOME/flopscope, else ~/.local/share/flopscope.
std::string DefaultDataDir();

// HOST:PORT checked (a port 0-65535) and in the form gRPC listens on ("::1:P" becomes
// "[::1]:P"). Any host: what --tcp takes with mutual TLS.
absl::StatusOr<std::string> TcpListenAddress(absl::string_view address);

// Plain TCP (no --tls-*) is served only on loopback and only when asked for explicitly.
// Accepts 127.0.0.1:PORT, [::1]:PORT (or ::1:PORT) and localhost:PORT; returns the address in
// the form gRPC listens on.
absl::StatusOr<std::string> LoopbackTcpAddress(absl::string_view address,
                                               bool insecure_loopback_tcp);

// Registers --data-dir, --socket, --tcp, --insecure-loopback-tcp, --tls-cert, --tls-key,
// --tls-ca, --log-level, --metrics, --metrics-max-ranks, --max-disk, --disk-check-period-s,
// --upstream, --outbox-max-mb, --upstream-drain-s, --report-cache-mb, --nice, --max-threads,
// --max-streams, --max-streams-per-uid, --max-new-jobs-per-minute, --max-queries-per-uid,
// --hello-timeout-s and
// --stream-idle-timeout-s.
void AddDaemonFlags(CLI::App& app, DaemonOptions* options, std::string* log_level);

// Fills in defaults and checks the combination: what main() calls after parsing.
absl::Status ResolveDaemonOptions(const std::string& log_level, DaemonOptions* options);

}  // namespace flopscope::daemon
