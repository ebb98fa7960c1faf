// bench/aggregator_scale: one aggregator against many node daemons (issue 17 item 5;
// docs/scaling.md). The aggregator is the real flopscoped, a process of its own. The node
// daemons are real too: `--nodes` DaemonServers in this process, each with its own data
// directory, socket and `--upstream unix:<aggregator socket>` (outbox, forwarder), fed by
// in-process producers over the Collector protocol: `--ranks-per-node` ranks each, one stream per
// rank, one batch per step as the injector sends it (bench/report_bench_jobs.h: a model of
// `layers` x `ops_per_layer` modules under step/forward/backward/optimizer, `kernels_per_step`
// kernels, step 1 counted).
//
// Every rank of every node starts at once (its stream opened and its hello sent, then its
// Welcome awaited: issue 33's "1024 ranks starting within one second"; the run fails when the
// hellos take longer), so the node daemons open their forwarded streams to the aggregator
// together. Every node then sends a step of each of its ranks every --step-ms (0: back to back,
// the most the machine can push) and forwards what it commits; the run ends when the aggregator
// holds every kernel (or stops gaining any for a minute). Prints how long the ranks took to
// start (and to be welcomed), the forwarded streams the node daemons reopened (their log lines
// "reopening the stream" and "no Welcome within": a stream upstream that stalled), the batches
// the aggregator lacks or holds twice (from each rank's kernels), each against its target
// (zero); the forwarded records/s and MB/s, the aggregator's CPU seconds (utime + stime from
// /proc while forwarding; getrusage from wait4 for its whole life) per rank and step and its
// peak thread count (/proc, sampled every 20 ms), the node side's CPU (this process) for
// comparison, the wall time of the real `flopscope report JOB` and `flopscope ranks JOB` against
// the aggregator (first run and median of --repeats), and the aggregator's disk per rank and
// step (its data directory after SIGTERM checkpointed every file). It fails unless the
// aggregator lists every rank and its report counts every uncounted kernel sent, with nothing
// rejected, lost or stored twice and no stream reopened. The node daemons' log (stderr of this
// process) goes to nodes.log in the bench's directory; --daemon measures another build's
// aggregator (the figures before a change). The last line is
//   aggregator_scale: ranks=R steps=S records_per_s=X mb_per_s=Y cpu_us_per_rank_step=C
//   report_ms=P ranks_ms=Q disk_bytes_per_rank_step=D start_s=T reconnects=N lost_batches=L
//   duplicate_batches=U aggregator_threads_peak=H
//
//   aggregator_scale [--nodes 16] [--ranks-per-node 64] [--steps 20] [--layers 8]
//                    [--ops-per-layer 8] [--kernels-per-step 256] [--step-ms 0] [--repeats 3]
//                    [--daemon PATH] [--smoke] [--keep-data]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/report_bench_jobs.h"
#include "client/connect/daemon_client.h"
#include "daemon/base/logger.h"
#include "daemon/server/daemon_server.h"
#include "flopscope/v1/collector.grpc.pb.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace v1 = flopscope::v1;
using flopscope::bench::RankBatches;
using flopscope::bench::RankShape;
using Clock = std::chrono::steady_clock;

constexpr const char* kJob = "scale";

// The aggregator, stopped by Die so that a failed run leaves no daemon behind.
pid_t g_aggregator = -1;
// The bench's own stderr: fd 2 goes to nodes.log (the node daemons' log lines) once running.
FILE* g_stderr = stderr;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(g_stderr, "aggregator_scale: %s\n", what.c_str());
  if (g_aggregator > 0) kill(g_aggregator, SIGKILL);
  std::exit(1);
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// User plus system CPU seconds of a getrusage/wait4 answer.
double CpuSecondsOf(const struct rusage& usage) {
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

struct Config {
  int nodes = 16;
  int ranks_per_node = 64;
  int steps = 20;
  int layers = 8;
  int ops_per_layer = 8;
  int kernels_per_step = 256;
  int step_ms = 0;
  int repeats = 3;
  std::string daemon = FLOPSCOPE_BENCH_DAEMON;  // the aggregator's binary
  bool keep_data = false;
  int world() const { return nodes * ranks_per_node; }
};

// A child process started with posix_spawn, its stdout and stderr into `log`.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const fs::path& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    const int error = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) Die("cannot start " + argv[0] + ": " + std::strerror(error));
  }

  // Waits for the exit: its status, and the child's whole CPU time in `cpu_s` when given.
  int Wait(double* cpu_s = nullptr) {
    int status = 0;
    struct rusage usage {};
    if (wait4(pid_, &status, 0, &usage) != pid_) Die("wait4 failed");
    if (cpu_s != nullptr) *cpu_s = CpuSecondsOf(usage);
    return status;
  }

  // utime + stime so far, every thread included (/proc/PID/stat fields 14 and 15).
  double CpuSeconds() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i >= 14) ticks += std::stod(field);
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Runs `argv` to its end: the wall seconds, its output in `output`; dies on a failure.
double RunTool(const std::vector<std::string>& argv, const fs::path& output) {
  const auto start = Clock::now();
  Child child(argv, output);
  const int status = child.Wait();
  const double seconds = SecondsSince(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(output);
    Die(argv[1] + " failed:\n" + std::string((std::istreambuf_iterator<char>(in)), {}));
  }
  return seconds;
}

struct Sent {
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> bytes{0};
};

uint64_t RecordsIn(const v1::Batch& batch) {
  return batch.strings_size() + batch.paths_size() + batch.ranges_size() + batch.kernels_size() +
         batch.kernel_flops_size() + batch.metadata_size() + batch.windows_size();
}

RankShape ShapeOf(const Config& config, int node, int rank) {
  return RankShape{.job = kJob,
                   .host = "node-" + std::to_string(node),
                   .rank = rank,
                   .world_size = config.world(),
                   .steps = config.steps,
                   .kernels_per_step = config.kernels_per_step,
                   .layers = config.layers,
                   .ops_per_layer = config.ops_per_layer,
                   .counted_first = config.steps > 2 ? 1 : -1,
                   .counted_last = config.steps > 2 ? 1 : -1};
}

// One rank's producer: a Collector stream to its node daemon, kept open across steps.
class Producer {
 public:
  // Opens the stream and sends the hello; AwaitWelcome reads the answer.
  Producer(v1::Collector::Stub& node, const RankShape& shape) : batches_(shape) {
    stream_ = node.Stream(&context_);
    v1::UpMessage up;
    *up.mutable_hello() = batches_.hello();
    if (!stream_->Write(up)) Die("no stream for rank " + std::to_string(shape.rank));
  }

  void AwaitWelcome() {
    v1::DownMessage down;
    if (!stream_->Read(&down) || !down.has_welcome()) {
      Die("no Welcome for a rank: " + stream_->Finish().error_message());
    }
  }

  // Sends step `step` and waits for its Ack.
  void Send(int step, Sent* sent) {
    v1::UpMessage up;
    *up.mutable_batch() = batches_.Step(step);
    sent->records += RecordsIn(up.batch());
    sent->bytes += up.batch().ByteSizeLong();
    v1::DownMessage down;
    if (!stream_->Write(up)) Die("a node daemon broke a stream: " + Finish());
    do {
      if (!stream_->Read(&down)) Die("a node daemon broke a stream: " + Finish());
    } while (!down.has_ack());
  }

  std::string Finish() {
    stream_->WritesDone();
    v1::DownMessage down;
    while (stream_->Read(&down)) {
    }
    const grpc::Status status = stream_->Finish();
    return status.ok() ? "" : status.error_message();
  }

 private:
  RankBatches batches_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>> stream_;
};

// One node daemon (flopscoped --upstream unix:<aggregator socket>, in this process) and its
// ranks' producers.
struct Node {
  std::unique_ptr<flopscope::daemon::DaemonServer> daemon;
  std::unique_ptr<v1::Collector::Stub> stub;
  std::vector<std::unique_ptr<Producer>> ranks;
};

std::unique_ptr<flopscope::daemon::DaemonServer> StartNodeDaemon(const fs::path& dir,
                                                                 const std::string& upstream) {
  flopscope::daemon::DaemonOptions options;
  options.data_dir = (dir / "data").string();
  options.socket_path = (dir / "fs.sock").string();
  options.log_level = flopscope::daemon::LogLevel::kWarning;
  options.drain_timeout = absl::Milliseconds(200);
  options.spool_patterns.clear();  // the user's own spools are none of the bench's business
  options.upstream = upstream;
  fs::create_directories(dir);
  auto daemon = flopscope::daemon::DaemonServer::Start(options);
  if (!daemon.ok()) Die("node daemon: " + daemon.status().ToString());
  return *std::move(daemon);
}

std::vector<Node> StartNodes(const Config& config, const fs::path& dir,
                             const std::string& upstream) {
  std::vector<Node> nodes(config.nodes);
  for (int n = 0; n < config.nodes; ++n) {
    nodes[n].daemon = StartNodeDaemon(dir / ("node-" + std::to_string(n)), upstream);
    nodes[n].stub = v1::Collector::NewStub(
        grpc::CreateChannel(nodes[n].daemon->target(), grpc::InsecureChannelCredentials()));
  }
  return nodes;
}

// Runs `body(node, n)` for every node, a thread each.
template <typename Body>
void ForEachNode(std::vector<Node>& nodes, Body body) {
  std::vector<std::thread> threads;
  for (size_t n = 0; n < nodes.size(); ++n) {
    threads.emplace_back([&body, &nodes, n] { body(nodes[n], static_cast<int>(n)); });
  }
  for (std::thread& thread : threads) thread.join();
}

struct Start {
  double hellos_s = 0;    // from the first hello to the last
  double welcomed_s = 0;  // from the first hello to the last Welcome
};

// Every rank of every node at once: each node's thread sends all its ranks' hellos, then reads
// their Welcomes.
Start StartRanks(const Config& config, std::vector<Node>& nodes) {
  const auto start = Clock::now();
  std::vector<double> hellos_s(nodes.size());
  ForEachNode(nodes, [&](Node& node, int n) {
    for (int r = 0; r < config.ranks_per_node; ++r) {
      node.ranks.push_back(std::make_unique<Producer>(
          *node.stub, ShapeOf(config, n, n * config.ranks_per_node + r)));
    }
    hellos_s[n] = SecondsSince(start);
    for (auto& rank : node.ranks) rank->AwaitWelcome();
  });
  return Start{*std::max_element(hellos_s.begin(), hellos_s.end()), SecondsSince(start)};
}

// The aggregator's thread count, sampled until stopped; the peak.
class ThreadSampler {
 public:
  explicit ThreadSampler(pid_t pid) : thread_([this, pid] { Run(pid); }) {}
  ~ThreadSampler() { Stop(); }

  int Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return peak_;
  }

 private:
  void Run(pid_t pid) {
    const std::string path = "/proc/" + std::to_string(pid) + "/status";
    while (!stop_) {
      std::ifstream status(path);
      std::string line;
      while (std::getline(status, line)) {
        if (line.rfind("Threads:", 0) == 0) peak_ = std::max(peak_, std::stoi(line.substr(8)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::atomic<bool> stop_{false};
  int peak_ = 0;  // written by the sampling thread only, read after the join
  std::thread thread_;
};

// Until the aggregator holds every kernel of every rank (or more: a batch stored twice); returns
// when it has gained none for `stall_s` (what it lacks is counted by CountBatches).
void AwaitForwarded(const Config& config, const std::string& socket, double stall_s) {
  const flopscope::client::DaemonClient aggregator(socket);
  const uint64_t expected =
      static_cast<uint64_t>(config.world()) * config.steps * config.kernels_per_step;
  auto progress = Clock::now();
  uint64_t kernels = 0;
  while (SecondsSince(progress) < stall_s) {
    const uint64_t before = kernels;
    absl::StatusOr<v1::ListJobsResponse> jobs = aggregator.ListJobs();
    if (!jobs.ok()) Die(jobs.status().ToString());
    for (const v1::JobInfo& job : jobs->jobs()) {
      if (job.job_id() == kJob) kernels = job.kernels();
      if (job.job_id() == kJob && (job.rejected_batches() != 0 || job.lost_records() != 0)) {
        Die("the aggregator rejected or lost records: " + job.ShortDebugString());
      }
    }
    if (kernels >= expected) return;
    if (kernels != before) progress = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(
      g_stderr,
      "aggregator_scale: the aggregator holds %llu of %llu kernels, none more for %.0f s\n",
      static_cast<unsigned long long>(kernels), static_cast<unsigned long long>(expected), stall_s);
}

struct Delivery {
  Start start;
  uint64_t reconnects = 0;  // forwarded streams the node daemons reopened
  uint64_t lost = 0;        // batches the aggregator lacks
  uint64_t twice = 0;       // batches it holds more than once
  int threads_peak = 0;     // the aggregator's threads
  bool met() const { return start.hellos_s <= 1 && reconnects == 0 && lost == 0 && twice == 0; }
};

// Each rank's batches at the aggregator, from its kernels (every batch carries
// kernels_per_step): those missing and those stored more than once.
void CountBatches(const Config& config, const std::string& socket, Delivery* delivery) {
  const flopscope::client::DaemonClient aggregator(socket);
  absl::StatusOr<v1::ListRanksResponse> ranks = aggregator.ListRanks(kJob);
  if (!ranks.ok()) Die(ranks.status().ToString());
  const int64_t per_rank = static_cast<int64_t>(config.steps) * config.kernels_per_step;
  int64_t missing_kernels = per_rank * (config.world() - ranks->ranks_size());
  int64_t extra_kernels = 0;
  for (const v1::RankInfo& rank : ranks->ranks()) {
    const int64_t kernels = static_cast<int64_t>(rank.kernels());
    missing_kernels += std::max<int64_t>(0, per_rank - kernels);
    extra_kernels += std::max<int64_t>(0, kernels - per_rank);
  }
  delivery->lost = (missing_kernels + config.kernels_per_step - 1) / config.kernels_per_step;
  delivery->twice = (extra_kernels + config.kernels_per_step - 1) / config.kernels_per_step;
}

// The node daemons' log lines that say a forwarded stream stalled and was opened again.
uint64_t CountReconnects(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  uint64_t reconnects = 0;
  while (std::getline(in, line)) {
    if (line.find("reopening the stream") != std::string::npos ||
        line.find("no Welcome within") != std::string::npos) {
      ++reconnects;
    }
  }
  return reconnects;
}

double ProcessCpuSeconds() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return CpuSecondsOf(usage);
}

struct Forwarding {
  double wall_s = 0;
  double cpu_s = 0;        // the aggregator's
  double nodes_cpu_s = 0;  // this process's: the node daemons and the producers
  double lag_s = 0;        // from the last step sent to a node to the aggregator holding all
};

// Every node sends its ranks' steps (one every step_ms, or back to back), its daemon forwarding
// them as they commit; done when the aggregator holds them all.
Forwarding Forward(const Config& config, std::vector<Node>& nodes, const Child& aggregator,
                   const std::string& socket, Sent* sent) {
  Forwarding result;
  const double cpu_before = aggregator.CpuSeconds();
  const double nodes_before = ProcessCpuSeconds();
  const auto start = Clock::now();
  ForEachNode(nodes, [&](Node& node, int) {
    for (int step = 0; step < config.steps; ++step) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(config.step_ms) * step);
      for (auto& rank : node.ranks) rank->Send(step, sent);
    }
  });
  const auto last_sent = Clock::now();
  AwaitForwarded(config, socket, 60);
  result.lag_s = SecondsSince(last_sent);
  result.wall_s = SecondsSince(start);
  result.cpu_s = aggregator.CpuSeconds() - cpu_before;
  result.nodes_cpu_s = ProcessCpuSeconds() - nodes_before;
  return result;
}

// The aggregator must hold every rank and every uncounted kernel sent.
void CheckAggregator(const Config& config, const std::string& socket) {
  const flopscope::client::DaemonClient daemon(socket);
  absl::StatusOr<v1::ListRanksResponse> ranks = daemon.ListRanks(kJob);
  if (!ranks.ok()) Die(ranks.status().ToString());
  if (ranks->ranks_size() != config.world()) {
    Die("the aggregator lists " + std::to_string(ranks->ranks_size()) + " ranks; " +
        std::to_string(config.world()) + " were forwarded");
  }
  v1::ReportRequest request;
  request.set_job_id(kJob);
  absl::StatusOr<v1::Report> report = daemon.GetReport(request);
  if (!report.ok()) Die(report.status().ToString());
  uint64_t kernels = 0;
  for (const v1::ModuleStats& module : report->modules()) {
    if (module.depth() == 0) kernels += module.kernels();
  }
  const uint64_t expected =
      flopscope::bench::UncountedKernels(ShapeOf(config, 0, 0)) * config.world();
  if (kernels != expected) {
    Die("the aggregator's report counts " + std::to_string(kernels) + " kernels; " +
        std::to_string(expected) + " uncounted kernels were forwarded");
  }
}

struct QueryTimes {
  double first_ms = 0;
  double median_ms = 0;
};

// `flopscope <command> JOB --socket S`, the real client: first run and the median of the rest.
QueryTimes TimeClient(const Config& config, const std::string& command, const std::string& socket,
                      const fs::path& dir) {
  const std::vector<std::string> argv = {FLOPSCOPE_BENCH_CLIENT, command, kJob, "--socket", socket};
  const fs::path output = dir / (command + ".out");
  QueryTimes times;
  times.first_ms = RunTool(argv, output) * 1000;
  std::vector<double> rest;
  for (int i = 0; i < config.repeats; ++i) rest.push_back(RunTool(argv, output) * 1000);
  std::sort(rest.begin(), rest.end());
  times.median_ms = rest[rest.size() / 2];
  return times;
}

uint64_t BytesUnder(const fs::path& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

Config ParseArgs(int argc, char** argv) {
  CLI::App app{"one flopscoped aggregator against many simulated node daemons"};
  Config config;
  bool smoke = false;
  app.add_option("--nodes", config.nodes, "simulated node daemons")->check(CLI::Range(1, 256));
  app.add_option("--ranks-per-node", config.ranks_per_node, "ranks on each node")
      ->check(CLI::Range(1, 1024));
  app.add_option("--steps", config.steps, "steps of every rank")->check(CLI::Range(1, 100'000));
  app.add_option("--layers", config.layers, "layers of the model")->check(CLI::Range(1, 1000));
  app.add_option("--ops-per-layer", config.ops_per_layer, "ops (modules) per layer")
      ->check(CLI::Range(1, 100));
  app.add_option("--kernels-per-step", config.kernels_per_step, "kernels per rank and step")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--step-ms", config.step_ms, "0: backlog; N: live, a step every N ms")
      ->check(CLI::Range(0, 600'000));
  app.add_option("--repeats", config.repeats, "timed client runs after the first (median)")
      ->check(CLI::Range(1, 100));
  app.add_option("--daemon", config.daemon,
                 "the aggregator's flopscoped (default: the build's), to measure another build's")
      ->check(CLI::ExistingFile);
  app.add_flag("--smoke", smoke, "2 nodes x 4 ranks x 4 steps: the ctest run that keeps it alive");
  app.add_flag("--keep-data", config.keep_data, "leave the data directories for inspection");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error));
  }
  if (smoke) {
    config = Config{.nodes = 2,
                    .ranks_per_node = 4,
                    .steps = 4,
                    .layers = 4,
                    .ops_per_layer = 4,
                    .kernels_per_step = 64,
                    .step_ms = config.step_ms,
                    .repeats = 1,
                    .daemon = config.daemon,
                    .keep_data = config.keep_data};
  }
  return config;
}

const char* Verdict(bool met) { return met ? "met" : "MISSED"; }

void PrintDelivery(const Config& config, const Delivery& delivery) {
  std::printf(
      "%d ranks started (their hellos sent) within %.2f s (target <= 1: %s), all welcomed "
      "by their node daemons after %.2f s\n",
      config.world(), delivery.start.hellos_s, Verdict(delivery.start.hellos_s <= 1),
      delivery.start.welcomed_s);
  std::printf("forwarded streams reopened: %llu (target 0: %s)\n",
              static_cast<unsigned long long>(delivery.reconnects),
              Verdict(delivery.reconnects == 0));
  std::printf("batches lost: %llu (target 0: %s); stored twice: %llu (target 0: %s)\n",
              static_cast<unsigned long long>(delivery.lost), Verdict(delivery.lost == 0),
              static_cast<unsigned long long>(delivery.twice), Verdict(delivery.twice == 0));
  std::printf("aggregator threads at the peak: %d\n", delivery.threads_peak);
}

void PrintFigures(const Config& config, const Sent& sent, const Forwarding& forwarding,
                  double total_cpu_s, const QueryTimes& report, const QueryTimes& ranks,
                  uint64_t disk_bytes, const Delivery& delivery) {
  PrintDelivery(config, delivery);
  const double rank_steps = static_cast<double>(config.world()) * config.steps;
  const double records_per_s = sent.records / forwarding.wall_s;
  const double mb_per_s = sent.bytes / forwarding.wall_s / 1e6;
  const double cpu_us = forwarding.cpu_s / rank_steps * 1e6;
  std::printf(
      "forwarded %.0f records, %.1f MB (%.0f bytes per rank and step) in %.2f s: "
      "%.0f records/s, %.1f MB/s\n",
      static_cast<double>(sent.records), sent.bytes / 1e6, sent.bytes / rank_steps,
      forwarding.wall_s, records_per_s, mb_per_s);
  std::printf("the aggregator held the last step %.2f s after the nodes had it\n",
              forwarding.lag_s);
  std::printf(
      "aggregator CPU while forwarding: %.2f s = %.1f us per rank and step, %.0f records "
      "per CPU second (%.2f s over its whole life, queries included)\n",
      forwarding.cpu_s, cpu_us, sent.records / forwarding.cpu_s, total_cpu_s);
  std::printf(
      "node daemons and producers (this process) meanwhile: %.2f s = %.1f us per rank "
      "and step\n",
      forwarding.nodes_cpu_s, forwarding.nodes_cpu_s / rank_steps * 1e6);
  std::printf(
      "flopscope report %s, %d ranks: first %.0f ms, median of %d %.0f ms (target < 1000: "
      "%s)\n",
      kJob, config.world(), report.first_ms, config.repeats, report.median_ms,
      report.median_ms < 1000 ? "met" : "MISSED");
  std::printf(
      "flopscope ranks %s, %d ranks: first %.0f ms, median of %d %.0f ms (target < 1000: "
      "%s)\n",
      kJob, config.world(), ranks.first_ms, config.repeats, ranks.median_ms,
      ranks.median_ms < 1000 ? "met" : "MISSED");
  std::printf("aggregator disk: %.1f MB = %.0f bytes per rank and step\n", disk_bytes / 1e6,
              disk_bytes / rank_steps);
  std::printf("load average (1 min) at the end: %.2f\n", LoadAverage());
  std::printf(
      "aggregator_scale: ranks=%d steps=%d records_per_s=%.0f mb_per_s=%.2f "
      "cpu_us_per_rank_step=%.1f report_ms=%.0f ranks_ms=%.0f "
      "disk_bytes_per_rank_step=%.0f start_s=%.2f reconnects=%llu lost_batches=%llu "
      "duplicate_batches=%llu aggregator_threads_peak=%d\n",
      config.world(), config.steps, records_per_s, mb_per_s, cpu_us, report.median_ms,
      ranks.median_ms, disk_bytes / rank_steps, delivery.start.hellos_s,
      static_cast<unsigned long long>(delivery.reconnects),
      static_cast<unsigned long long>(delivery.lost),
      static_cast<unsigned long long>(delivery.twice), delivery.threads_peak);
}

}  // namespace

int main(int argc, char** argv) {
  const Config config = ParseArgs(argc, argv);
  flopscope::daemon::SetLogLevel(flopscope::daemon::LogLevel::kWarning);
  const fs::path dir =
      fs::temp_directory_path() / ("flopscope-aggregator-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string socket = (dir / "aggregator.sock").string();
  const fs::path data = dir / "aggregator";
  // The node daemons log to this process's stderr: into nodes.log, counted by CountReconnects.
  const fs::path nodes_log = dir / "nodes.log";
  g_stderr = fdopen(dup(2), "w");
  const int log_fd = open(nodes_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (g_stderr == nullptr || log_fd < 0 || dup2(log_fd, 2) < 0) Die("cannot log to nodes.log");
  close(log_fd);
  Child aggregator({config.daemon, "--socket", socket, "--data-dir", data.string(),
                    "--collect-spools", "--log-level", "warning"},
                   dir / "aggregator.log");
  g_aggregator = aggregator.pid();
  if (absl::Status s = flopscope::client::DaemonClient(socket).CheckReachable(absl::Seconds(20));
      !s.ok()) {
    Die("the aggregator did not start (" + (dir / "aggregator.log").string() +
        "): " + s.ToString());
  }
  const std::string mode = config.step_ms > 0
                               ? "a step every " + std::to_string(config.step_ms) + " ms"
                               : "steps back to back";
  std::printf(
      "%d nodes x %d ranks, %d steps of %d modules and %d kernels, %s; load average "
      "%.2f\n",
      config.nodes, config.ranks_per_node, config.steps,
      flopscope::bench::ModuleCount(ShapeOf(config, 0, 0)), config.kernels_per_step, mode.c_str(),
      LoadAverage());
  ThreadSampler sampler(aggregator.pid());
  std::vector<Node> nodes = StartNodes(config, dir, "unix:" + socket);
  Delivery delivery;
  delivery.start = StartRanks(config, nodes);
  Sent sent;
  const Forwarding forwarding = Forward(config, nodes, aggregator, socket, &sent);
  CountBatches(config, socket, &delivery);
  delivery.reconnects = CountReconnects(nodes_log);
  if (!delivery.met()) {
    delivery.threads_peak = sampler.Stop();
    PrintDelivery(config, delivery);
    Die("missed a delivery target (the node daemons' log: " + nodes_log.string() + ")");
  }
  for (Node& node : nodes) {
    for (auto& rank : node.ranks) {
      if (std::string error = rank->Finish(); !error.empty()) Die("a producer's end: " + error);
    }
    node.daemon->Shutdown();
  }
  CheckAggregator(config, socket);
  const QueryTimes report = TimeClient(config, "report", socket, dir);
  const QueryTimes ranks = TimeClient(config, "ranks", socket, dir);
  delivery.threads_peak = sampler.Stop();
  kill(aggregator.pid(), SIGTERM);
  double total_cpu_s = 0;
  const int status = aggregator.Wait(&total_cpu_s);
  g_aggregator = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("the aggregator did not exit cleanly");
  delivery.reconnects = CountReconnects(nodes_log);  // the node daemons' shutdown included
  PrintFigures(config, sent, forwarding, total_cpu_s, report, ranks, BytesUnder(data), delivery);
  if (!delivery.met()) return 1;
  if (config.keep_data) {
    std::printf("data kept in %s\n", dir.c_str());
  } else {
    fs::remove_all(dir);
  }
  return 0;
}
