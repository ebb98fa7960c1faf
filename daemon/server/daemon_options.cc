#include "daemon/server/daemon_options.h"

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/endpoint.h"
#include "daemon/metrics/metrics_endpoint.h"
#include "daemon/retention/disk_budget.h"

namespace flopscope::daemon {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

constexpr char kSystemDataDir[] = "/var/lib/flopscope";

bool SystemDataDirUsable() {
  if (access(kSystemDataDir, F_OK) == 0) return access(kSystemDataDir, W_OK | X_OK) == 0;
  return access("/var/lib", W_OK | X_OK) == 0;  // we could create it (running as root)
}

constexpr char kTlsMissing[] =
    "without TLS, plain TCP is served only on loopback (127.0.0.1, ::1 or localhost) with "
    "--insecure-loopback-tcp; for another address give --tls-cert, --tls-key and --tls-ca "
    "(mutual TLS)";

// --tcp with --tls-*: any address; the files are read and checked when the server starts.
absl::Status ResolveTlsTcp(DaemonOptions* options) {
  if (options->tcp_address.empty()) {
    if (!options->upstream.empty()) return absl::OkStatus();  // they secure --upstream only
    return absl::InvalidArgumentError(
        "--tls-cert, --tls-key and --tls-ca secure the TCP port: add --tcp HOST:PORT");
  }
  if (options->insecure_loopback_tcp) {
    return absl::InvalidArgumentError(
        "--insecure-loopback-tcp asks for plain TCP, --tls-* for mutual TLS: drop one");
  }
  absl::StatusOr<std::string> tcp = TcpListenAddress(options->tcp_address);
  if (!tcp.ok()) return tcp.status();
  options->tcp_address = *std::move(tcp);
  return absl::OkStatus();
}

// The most tasks (threads) this process may run: its cgroup's pids.max (cgroup v2, which
// systemd's TasksMax sets), or RLIMIT_NPROC for a user other than root; 0 when unlimited.
int64_t TaskLimit() {
  int64_t limit = 0;
  auto lower = [&limit](int64_t value) {
    if (value > 0 && (limit == 0 || value < limit)) limit = value;
  };
  // Each line is "ID:CONTROLLERS:PATH": cgroup v2's is "0::PATH" under /sys/fs/cgroup, v1's
  // pids controller "N:pids:PATH" under /sys/fs/cgroup/pids.
  std::ifstream cgroup("/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    std::string root;
    size_t path_at = 0;
    if (line.rfind("0::", 0) == 0) {
      root = "/sys/fs/cgroup";
      path_at = 3;
    } else if (const size_t at = line.find(":pids:"); at != std::string::npos) {
      root = "/sys/fs/cgroup/pids";
      path_at = at + 6;
    } else {
      continue;
    }
    std::ifstream pids_max(root + line.substr(path_at) + "/pids.max");
    std::string text;
    int64_t value = 0;
    if (pids_max >> text && absl::SimpleAtoi(text, &value)) lower(value);  // "max": none
  }
  rlimit nproc{};
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY) {
    lower(static_cast<int64_t>(nproc.rlim_cur));
  }
  return limit;
}

void AddPeerBoundFlags(CLI::App& app, DaemonOptions* options) {
  app.add_option("--max-threads", options->max_threads,
                 "the most threads the daemon serves calls on (queries; streams hold none) "
                 "(default: 4096, or 3/4 of a lower task limit: the cgroup's pids.max, "
                 "RLIMIT_NPROC)")
      ->check(CLI::Range(32, 1 << 16));
  app.add_option("--max-streams", options->max_streams,
                 "the most collector streams the daemon holds at once (default: what its "
                 "open-file limit affords, 4 files a stream, half the limit left to queries; "
                 "the soft limit is first raised to the hard one)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-streams-per-uid", options->max_streams_per_uid,
                 "the most collector streams one user may hold open at once (default 256); "
                 "streams a node daemon forwards count only in the total")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-new-jobs-per-minute", options->max_new_jobs_per_minute,
                 "the most new jobs one user may create per minute (default 120; root and "
                 "forwarded jobs are not limited); 0: no limit")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--max-queries-per-uid", options->max_queries_per_uid,
                 "the most queries (jobs, report, ranks, export, prune) one user may have in "
                 "flight at once (default 32; root is not limited)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option_function<double>(
         "--hello-timeout-s", [options](double s) { options->hello_timeout = absl::Seconds(s); },
         "a stream that sends no hello within this many seconds is ended (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option_function<double>(
         "--stream-idle-timeout-s",
         [options](double s) { options->stream_idle_timeout = absl::Seconds(s); },
         "a stream that sends nothing for this many seconds is ended; its producer reconnects "
         "and resumes, losing nothing (default 1800)")
      ->check(CLI::Range(1.0, 86400.0 * 7));
}

}  // namespace

std::string DefaultDataDir() {
  if (std::string dir = Env("FLOPSCOPE_DATA_DIR"); !dir.empty()) return dir;
  if (SystemDataDirUsable()) return kSystemDataDir;
  if (std::string xdg = Env("XDG_DATA_HOME"); !xdg.empty()) return xdg + "/flopscope";
  std::string home = Env("HOME");
  if (home.empty()) home = ".";
  return home + "/.local/share/flopscope";
}

absl::StatusOr<std::string> TcpListenAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, ": expected HOST:PORT, e.g. 127.0.0.1:7070"));
  }
  const absl::string_view host = address.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, ": the port must be a number from 0 to 65535"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, ": expected HOST:PORT, e.g. 0.0.0.0:7070"));
  }
  if (host == "::1") return absl::StrCat("[::1]:", port);  // the form gRPC parses
  return std::string(address);
}

absl::StatusOr<std::string> LoopbackTcpAddress(absl::string_view address,
                                               bool insecure_loopback_tcp) {
  if (!insecure_loopback_tcp) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tcp ", address, " needs --insecure-loopback-tcp: ", kTlsMissing));
  }
  absl::StatusOr<std::string> parsed = TcpListenAddress(address);
  if (!parsed.ok()) return parsed.status();
  const absl::string_view host = absl::string_view(*parsed).substr(0, parsed->rfind(':'));
  if (host != "127.0.0.1" && host != "[::1]" && host != "localhost") {
    return absl::InvalidArgumentError(absl::StrCat("--tcp ", address, ": ", kTlsMissing));
  }
  return parsed;
}

void AddDaemonFlags(CLI::App& app, DaemonOptions* options, std::string* log_level) {
  app.add_option("--data-dir", options->data_dir,
                 "where job data lives (default: $FLOPSCOPE_DATA_DIR, else /var/lib/flopscope "
                 "when writable, else $XDG_DATA_HOME/flopscope or ~/.local/share/flopscope)");
  app.add_option("--socket", options->socket_path,
                 "unix socket to serve (default: $FLOPSCOPE_SOCKET, else "
                 "/run/flopscope/flopscope.sock for root or when it exists, else "
                 "$XDG_RUNTIME_DIR/flopscope.sock)");
  app.add_option("--tcp,--listen", options->tcp_address,
                 "also serve TCP on HOST:PORT (an aggregator's port): mutual TLS with "
                 "--tls-cert/--tls-key/--tls-ca (any address), else plain TCP on loopback with "
                 "--insecure-loopback-tcp");
  app.add_flag("--insecure-loopback-tcp", options->insecure_loopback_tcp,
               "allow --tcp without TLS on a loopback address (health checks only: a plain TCP "
               "peer has no identity and may reach no job)");
  app.add_option("--tls-cert", options->tls.cert,
                 "PEM certificate the --tcp port presents (mutual TLS; with --tls-key and "
                 "--tls-ca)");
  app.add_option("--tls-key", options->tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", options->tls.ca,
                 "PEM CA certificate: TCP clients must present a certificate it signed; its "
                 "subject is who they are (CN=user name, or OU=flopscope-node for node daemons)");
  app.add_option("--admin-group", options->admin_group,
                 "members of this group may read, write and profile every job ('' for none)")
      ->default_val("flopscope");
  app.add_option("--log-level", *log_level, "error, warning, info or debug")->default_val("info");
  app.add_option("--metrics", options->metrics_address,
                 "serve /metrics for Prometheus on [HOST:]PORT (no host: 127.0.0.1; 0.0.0.0:PORT "
                 "for every interface)");
  app.add_option("--metrics-max-ranks", options->metrics_max_ranks,
                 "ranks with series on /metrics; the least recently active are dropped first")
      ->check(CLI::Range(1, 1 << 20));
  // A function, not the vector itself: CLI11 keeps a vector's default when no value is given.
  app.add_option_function<std::vector<std::string>>(
         "--collect-spools",
         [options](const std::vector<std::string>& patterns) {
           options->spool_patterns.clear();
           for (const std::string& pattern : patterns) {
             if (!pattern.empty()) options->spool_patterns.push_back(pattern);
           }
         },
         "directories (shell patterns, comma-separated) whose orphaned spool files are "
         "delivered at start and every minute (default: /var/tmp/flopscope-spool-*,"
         "/run/user/*/flopscope-spool); none when given no value")
      ->expected(0, CLI::detail::expected_max_vector_size)
      ->delimiter(',');
  app.add_option("--collect-spools-for", options->spool_destinations,
                 "also deliver the spools that were aimed at these daemon sockets or addresses "
                 "(comma-separated; '*' for every one): by default only those aimed at this "
                 "daemon's own --socket and --tcp are")
      ->delimiter(',');
  app.add_option("--collect-spools-period-s", options->spool_period_s,
                 "seconds between two passes of --collect-spools")
      ->check(CLI::Range(0.05, 86400.0));
  app.add_option("--keep-raw-steps", options->keep_raw_steps,
                 "steps of each rank whose raw kernels and range events are kept; older steps "
                 "are folded into rollups that give the same reports (0: keep everything raw)")
      ->check(CLI::NonNegativeNumber);
  app.add_option_function<int64_t>(
         "--report-cache-mb", [options](int64_t mb) { options->report_cache_bytes = mb << 20; },
         "MiB of memory for the rank files' range events kept between reports, so that a "
         "report over a running job reads only what was committed since the last one "
         "(default 512; 0: read everything every time)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--nice", options->nice,
                 "CPU priority of the daemon's threads and, when it leads its session, of that "
                 "session, so that a job keeping every core busy does not keep queries waiting "
                 "(-20..19, default -10; needs CAP_SYS_NICE below 0, else the daemon keeps its "
                 "priority and says so)")
      ->check(CLI::Range(-20, 19));
  app.add_option("--max-disk", options->max_disk,
                 "keep the jobs' files under SIZE (e.g. 20G, 500M; units K, M, G, T of 1024) by "
                 "deleting the least recently seen finished jobs, whole; running jobs are never "
                 "deleted (default: no budget)");
  app.add_option("--max-disk-per-user", options->max_disk_per_user,
                 "refuse new records of a user whose jobs take this much (e.g. 5G), rather "
                 "than delete anyone's data; checked every --disk-check-period-s");
  app.add_option("--prune-grace-s", options->prune_grace_s,
                 "--max-disk never deletes a job that ended less than this many seconds ago "
                 "(default 300)")
      ->check(CLI::Range(0.0, 86400.0 * 365));
  app.add_option("--disk-check-period-s", options->disk_check_period_s,
                 "seconds between two checks of --max-disk")
      ->check(CLI::Range(0.05, 86400.0));
  app.add_option("--upstream", options->upstream,
                 "forward every committed batch to the aggregator daemon there: HOST:PORT over "
                 "mutual TLS (--tls-cert/--tls-key/--tls-ca), or unix:/path to its socket; "
                 "batches wait in <data-dir>/outbox.sqlite until it has them");
  app.add_option_function<int64_t>(
         "--outbox-max-mb", [options](int64_t mb) { options->outbox_max_bytes = mb << 20; },
         "MiB of batches that may wait for --upstream; beyond it new batches stay on this "
         "node only, counted (default 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--upstream-drain-s", options->upstream_drain_s,
                 "on SIGTERM, keep forwarding for up to this many seconds until no batch waits "
                 "for --upstream (for a daemon that does not start again on its data dir, such "
                 "as a Slurm job's); 0, the default: what waits is sent after the next start")
      ->check(CLI::Range(0.0, 86400.0));
  AddPeerBoundFlags(app, options);
}

int DefaultMaxThreads() {
  constexpr int kMost = 4096;  // an aggregator holds a stream per forwarded session
  constexpr int kLeast = 32;
  int64_t tasks = TaskLimit();
  if (tasks <= 0) return kMost;
  return static_cast<int>(std::clamp<int64_t>(tasks * 3 / 4, kLeast, kMost));
}

absl::Status ResolveDaemonOptions(const std::string& log_level, DaemonOptions* options) {
  absl::StatusOr<LogLevel> level = ParseLogLevel(log_level);
  if (!level.ok()) return level.status();
  options->log_level = *level;
  if (options->data_dir.empty()) options->data_dir = DefaultDataDir();
  if (options->max_threads == 0) options->max_threads = DefaultMaxThreads();
  if (options->socket_path.empty()) options->socket_path = DefaultSocketPath();
  if (options->socket_path.rfind("unix:", 0) == 0) options->socket_path.erase(0, 5);
  // Absolute, so that log lines and the gRPC target mean the same whatever the working directory.
  std::error_code ignored;
  options->data_dir = std::filesystem::absolute(options->data_dir, ignored).string();
  options->socket_path = std::filesystem::absolute(options->socket_path, ignored).string();
  if (!options->metrics_address.empty()) {
    absl::StatusOr<std::string> metrics = metrics::ParseMetricsAddress(options->metrics_address);
    if (!metrics.ok()) return metrics.status();
    options->metrics_address = *std::move(metrics);
  }
  if (!options->max_disk.empty()) {
    absl::StatusOr<uint64_t> max_disk = ParseDiskSize(options->max_disk);
    if (!max_disk.ok()) return max_disk.status();
    options->max_disk_bytes = *max_disk;
  }
  if (!options->max_disk_per_user.empty()) {
    absl::StatusOr<uint64_t> quota =
        ParseDiskSize(options->max_disk_per_user, "--max-disk-per-user");
    if (!quota.ok()) return quota.status();
    options->max_disk_per_user_bytes = *quota;
  }
  if (options->insecure_loopback_tcp && options->tcp_address.empty()) {
    return absl::InvalidArgumentError("--insecure-loopback-tcp needs --tcp HOST:PORT");
  }
  if (options->tls.any()) return ResolveTlsTcp(options);
  if (options->tcp_address.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> tcp =
      LoopbackTcpAddress(options->tcp_address, options->insecure_loopback_tcp);
  if (!tcp.ok()) return tcp.status();
  options->tcp_address = *std::move(tcp);
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
