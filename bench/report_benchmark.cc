// bench/report_benchmark: how fast the daemon answers the report questions of issue 5, against an
// in-process daemon (DaemonServer) filled through its Collector service like real producers:
//   1. GetReport for a job of 8 ranks x 1M kernels (target < 200 ms): the report is built from
//      the per-module aggregates kept at ingest, so it must not grow with the kernel count;
//   2. the `flopscope ranks` listing (RenderRanksListing: ListRanks, one report per rank, the
//      profiles and the straggler analysis) over 1024 small ranks (target < 1 s). One of them is
//      planted as a straggler: the run fails unless exactly it is flagged, with the right module.
// Prints each median with its target and whether it was met; the last line is
//   report_bench: report_ms=X ranks_ms=Y
//
//   report_benchmark [--ranks 8] [--kernels-per-rank 1000000] [--many-ranks 1024] [--repeats 5]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "client/daemon_client.h"
#include "client/ranks_command.h"
#include "common/version.h"
#include "daemon/daemon_server.h"
#include "daemon/logger.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = flopscope::v1;
using Clock = std::chrono::steady_clock;

constexpr int kLayers = 8;
constexpr int kOpsPerLayer = 4;
constexpr int64_t kKernelGapNs = 1000;
constexpr int64_t kKernelNs = 500;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "report_benchmark: %s\n", what.c_str());
  std::exit(1);
}

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The shape of one producer's data: a model of kLayers layers of kOpsPerLayer ops, `steps`
// steps, `kernels_per_step` kernels spread evenly over the ops.
struct RankShape {
  std::string job;
  int rank = 0;
  int world_size = 1;
  int steps = 1;
  int kernels_per_step = 1;
  // This rank's kernels of op `slow_op` (0 .. kLayers * kOpsPerLayer - 1) run kSlowKernelNs longer
  // and its steps as much longer: the straggler `flopscope ranks` must find. -1: none.
  int slow_rank = -1;
  int slow_op = -1;
};

constexpr int64_t kSlowKernelNs = 20'000;

// Path ids: 1 model, then per layer its own id followed by its ops; the four phases after.
uint64_t LayerPath(int layer) { return 2 + layer * (kOpsPerLayer + 1); }
uint64_t OpPath(int layer, int op) { return LayerPath(layer) + 1 + op; }
constexpr uint64_t kFirstPhasePath = 2 + kLayers * (kOpsPerLayer + 1);
constexpr const char* kPhases[] = {"step", "forward", "backward", "optimizer"};

void AddDefinitions(v1::Batch& batch) {
  auto add_path = [&](uint64_t id, uint64_t parent, std::string name, std::string domain) {
    v1::RangePath* path = batch.add_paths();
    path->set_id(id);
    path->set_parent_id(parent);
    path->set_name(std::move(name));
    path->set_domain(std::move(domain));
  };
  add_path(1, 0, "model", "");
  for (int layer = 0; layer < kLayers; ++layer) {
    add_path(LayerPath(layer), 1, "layer." + std::to_string(layer), "");
    for (int op = 0; op < kOpsPerLayer; ++op) {
      add_path(OpPath(layer, op), LayerPath(layer), "op." + std::to_string(op), "");
    }
  }
  for (uint64_t i = 0; i < 4; ++i) add_path(kFirstPhasePath + i, 0, kPhases[i], "flopscope");
  v1::StringDef* name = batch.add_strings();
  name->set_id(1);
  name->set_value("_Z11gemm_kernelIfLi128ELi64EEvPKT_S2_PS0_iii");
  for (const auto& [key, value] :
       {std::pair<const char*, const char*>{"batch_size", "8"}, {"precision", "bf16"}}) {
    v1::Metadata* entry = batch.add_metadata();
    entry->set_key(key);
    entry->set_value(value);
    entry->set_time_ns(absl::GetCurrentTimeNanos() - 3'600'000'000'000LL);
  }
}

// Builds one step's batch: its phase ranges, the module ranges and its kernels.
class StepBatchBuilder {
 public:
  StepBatchBuilder(const RankShape& shape, int64_t base_ns) : shape_(shape), base_ns_(base_ns) {}

  v1::Batch Build(int step) {
    v1::Batch batch;
    batch.set_seq(static_cast<uint64_t>(step) + 1);
    if (step == 0) AddDefinitions(batch);
    const int64_t length = static_cast<int64_t>(shape_.kernels_per_step) * kKernelGapNs;
    const bool slow = shape_.rank == shape_.slow_rank;
    const int64_t start = base_ns_ + step * (length + 1'000'000);
    AddPhases(batch, start, length, slow ? SlowKernels() * kSlowKernelNs : 0);
    const uint64_t model = AddRange(batch, 1, 0, start, start + length);
    const int ops = kLayers * kOpsPerLayer;
    for (int op_index = 0; op_index < ops; ++op_index) {
      const int first = shape_.kernels_per_step * op_index / ops;
      const int end = shape_.kernels_per_step * (op_index + 1) / ops;
      const int layer = op_index / kOpsPerLayer;
      const int64_t op_start = start + first * kKernelGapNs;
      const int64_t op_end = start + end * kKernelGapNs;
      if (op_index % kOpsPerLayer == 0) {
        const int64_t layer_end =
            start + shape_.kernels_per_step * (op_index + kOpsPerLayer) / ops * kKernelGapNs;
        layer_instance_ = AddRange(batch, LayerPath(layer), model, op_start, layer_end);
      }
      const uint64_t op_path = OpPath(layer, op_index % kOpsPerLayer);
      const uint64_t op = AddRange(batch, op_path, layer_instance_, op_start, op_end);
      const int64_t duration =
          slow && op_index == shape_.slow_op ? kKernelNs + kSlowKernelNs : kKernelNs;
      for (int k = first; k < end; ++k) {
        AddKernel(batch, op_path, op, start + k * kKernelGapNs, duration);
      }
    }
    if (step + 1 == shape_.steps) batch.set_final(true);
    return batch;
  }

 private:
  int SlowKernels() const {
    const int ops = kLayers * kOpsPerLayer;
    return shape_.kernels_per_step * (shape_.slow_op + 1) / ops -
           shape_.kernels_per_step * shape_.slow_op / ops;
  }

  void AddPhases(v1::Batch& batch, int64_t start, int64_t length, int64_t extra) {
    const int64_t bounds[][2] = {{start, start + length + extra},
                                 {start, start + length / 3},
                                 {start + length / 3, start + length * 9 / 10},
                                 {start + length * 9 / 10, start + length}};
    for (uint64_t i = 0; i < 4; ++i) {
      v1::RangeEvent* range = batch.add_ranges();
      range->set_path_id(kFirstPhasePath + i);
      range->set_instance_id(next_instance_++);
      range->set_thread_id(1);
      range->set_start_ns(bounds[i][0]);
      range->set_end_ns(bounds[i][1]);
      range->set_kind(v1::RANGE_KIND_START_END);
    }
  }

  uint64_t AddRange(v1::Batch& batch, uint64_t path, uint64_t parent, int64_t start, int64_t end) {
    v1::RangeEvent* range = batch.add_ranges();
    range->set_path_id(path);
    range->set_instance_id(next_instance_++);
    range->set_parent_instance_id(parent);
    range->set_thread_id(77);
    range->set_start_ns(start);
    range->set_end_ns(end);
    range->set_kind(v1::RANGE_KIND_PUSH_POP);
    return range->instance_id();
  }

  void AddKernel(v1::Batch& batch, uint64_t path, uint64_t instance, int64_t start,
                 int64_t duration) {
    v1::KernelRecord* kernel = batch.add_kernels();
    kernel->set_correlation_id(next_correlation_++);
    kernel->set_path_id(path);
    kernel->set_range_instance_id(instance);
    kernel->set_name_id(1);
    kernel->set_stream_id(7);
    kernel->set_start_ns(start + 100);
    kernel->set_end_ns(start + 100 + duration);
    kernel->set_grid_x(108);
    kernel->set_grid_y(1);
    kernel->set_grid_z(1);
    kernel->set_block_x(256);
    kernel->set_block_y(1);
    kernel->set_block_z(1);
    kernel->set_kind(v1::ACTIVITY_KIND_KERNEL);
  }

  const RankShape& shape_;
  const int64_t base_ns_;
  uint64_t next_instance_ = 1;
  uint64_t next_correlation_ = 1;
  uint64_t layer_instance_ = 0;
};

v1::SessionHello HelloFor(const RankShape& shape) {
  v1::SessionHello hello;
  hello.set_protocol_version(flopscope::kProtocolVersion);
  hello.set_session_id(shape.job + "-rank-" + std::to_string(shape.rank));
  hello.set_job_id(shape.job);
  hello.set_rank(shape.rank);
  hello.set_world_size(shape.world_size);
  hello.set_host("bench-node-" + std::to_string(shape.rank / 8));
  hello.set_pid(10000 + shape.rank);
  hello.set_command("python train.py");
  hello.set_injector_version(flopscope::kVersion);
  hello.set_start_time_ns(absl::GetCurrentTimeNanos() - 3'600'000'000'000LL);
  hello.add_devices()->set_name("NVIDIA H100 80GB HBM3");
  return hello;
}

// One producer: hello, every step's batch (each acknowledged before the next), then the end.
void Produce(v1::Collector::Stub& collector, const RankShape& shape) {
  grpc::ClientContext context;
  auto stream = collector.Stream(&context);
  v1::UpMessage up;
  v1::DownMessage down;
  *up.mutable_hello() = HelloFor(shape);
  if (!stream->Write(up) || !stream->Read(&down) || !down.has_welcome()) {
    Die("no Welcome for " + shape.job + " rank " + std::to_string(shape.rank) + ": " +
        stream->Finish().error_message());
  }
  StepBatchBuilder builder(shape, absl::GetCurrentTimeNanos() - 3'000'000'000'000LL);
  for (int step = 0; step < shape.steps; ++step) {
    *up.mutable_batch() = builder.Build(step);
    if (!stream->Write(up) || !stream->Read(&down) || !down.has_ack()) {
      stream->WritesDone();
      Die("batch refused for rank " + std::to_string(shape.rank) + ": " +
          stream->Finish().error_message());
    }
  }
  stream->WritesDone();
  while (stream->Read(&down)) {
  }
  if (grpc::Status status = stream->Finish(); !status.ok()) Die(status.error_message());
}

// Runs the producers of `ranks` ranks, `threads` at a time.
void FillJob(const std::string& target, RankShape shape, int ranks, int threads) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto collector = v1::Collector::NewStub(channel);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int rank = next.fetch_add(1); rank < ranks; rank = next.fetch_add(1)) {
      RankShape mine = shape;
      mine.rank = rank;
      Produce(*collector, mine);
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back(work);
  for (std::thread& worker : workers) worker.join();
}

// Median milliseconds of `repeats` runs of `body` after one warm-up run.
template <typename Body>
double MedianMs(int repeats, Body body) {
  body();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    body();
    times.push_back(MillisecondsSince(start));
  }
  return Median(times);
}

void PrintAgainstTarget(const char* what, double ms, double target_ms) {
  std::printf("%-52s %9.1f ms  (target < %.0f ms: %s)\n", what, ms, target_ms,
              ms < target_ms ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flopscope report benchmark"};
  int ranks = 8;
  int kernels_per_rank = 1'000'000;
  int many_ranks = 1024;
  int repeats = 5;
  app.add_option("--ranks", ranks, "ranks of the big job")->check(CLI::Range(1, 1024));
  app.add_option("--kernels-per-rank", kernels_per_rank, "kernels per rank of the big job")
      ->check(CLI::Range(100, 100'000'000));
  app.add_option("--many-ranks", many_ranks, "ranks of the listing job")
      ->check(CLI::Range(2, 100'000));
  app.add_option("--repeats", repeats, "timed runs per figure (the median is printed)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  const fs::path dir =
      fs::temp_directory_path() / ("flopscope-report-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  flopscope::daemon::DaemonOptions options;
  options.data_dir = (dir / "data").string();
  options.socket_path = (dir / "fs.sock").string();
  options.log_level = flopscope::daemon::LogLevel::kWarning;
  // The daemon logs every connect and disconnect at info: 1032 of them would bury the figures.
  flopscope::daemon::SetLogLevel(options.log_level);
  options.drain_timeout = absl::Milliseconds(200);
  auto server = flopscope::daemon::DaemonServer::Start(options);
  if (!server.ok()) Die(server.status().ToString());
  const std::string target = (*server)->target();

  const int steps = 100;
  auto start = Clock::now();
  FillJob(target,
          {.job = "big",
           .world_size = ranks,
           .steps = steps,
           .kernels_per_step = std::max(kernels_per_rank / steps, 1)},
          ranks, ranks);
  const uint64_t big_kernels =
      static_cast<uint64_t>(ranks) * steps * std::max(kernels_per_rank / steps, 1);
  std::printf("filled job 'big': %d ranks x %llu kernels in %.1f s\n", ranks,
              static_cast<unsigned long long>(big_kernels / ranks),
              MillisecondsSince(start) / 1000);
  start = Clock::now();
  const int slow_rank = many_ranks / 3;
  FillJob(target,
          {.job = "many",
           .world_size = many_ranks,
           .steps = 2,
           .kernels_per_step = 64,
           .slow_rank = slow_rank,
           .slow_op = 13},
          many_ranks, 8);
  std::printf("filled job 'many': %d ranks x 128 kernels in %.1f s\n", many_ranks,
              MillisecondsSince(start) / 1000);

  const flopscope::client::DaemonClient daemon(options.socket_path);
  v1::ReportRequest request;
  request.set_job_id("big");
  uint64_t reported_kernels = 0;
  const double report_ms = MedianMs(repeats, [&] {
    absl::StatusOr<v1::Report> report = daemon.GetReport(request);
    if (!report.ok()) Die(report.status().ToString());
    reported_kernels = 0;
    for (const v1::ModuleStats& module : report->modules()) {
      if (module.depth() == 0) reported_kernels += module.kernels();
    }
  });
  if (reported_kernels != big_kernels) {
    Die("the report counts " + std::to_string(reported_kernels) + " kernels, " +
        std::to_string(big_kernels) + " were sent");
  }

  flopscope::client::RanksOptions ranks_options;
  ranks_options.job_id = "many";
  size_t listing_lines = 0;
  const double ranks_ms = MedianMs(repeats, [&] {
    absl::StatusOr<std::string> listing =
        flopscope::client::RenderRanksListing(daemon, ranks_options);
    if (!listing.ok()) Die(listing.status().ToString());
    listing_lines = std::count(listing->begin(), listing->end(), '\n');
  });
  if (listing_lines < static_cast<size_t>(many_ranks) + 2) {
    Die("the listing has " + std::to_string(listing_lines) + " lines for " +
        std::to_string(many_ranks) + " ranks");
  }
  // The listing must have found the straggler planted above, and the module that slows it.
  absl::StatusOr<v1::ListRanksResponse> listed = daemon.ListRanks("many");
  if (!listed.ok()) Die(listed.status().ToString());
  absl::StatusOr<std::vector<flopscope::client::RankFigures>> figures =
      flopscope::client::FetchRankFigures(daemon, *listed, {}, {});
  if (!figures.ok()) Die(figures.status().ToString());
  for (int i = 0; i < listed->ranks_size(); ++i) {
    const auto& straggler = (*figures)[i].straggler;
    const bool planted = listed->ranks(i).rank() == slow_rank;
    if (planted != straggler.has_value() ||
        (planted && straggler->module != "model/layer.3/op.1")) {
      Die("rank " + std::to_string(listed->ranks(i).rank()) + ": straggler " +
          (straggler ? straggler->module : "none") + ", expected " +
          (planted ? "model/layer.3/op.1" : "none"));
    }
  }
  std::printf("flopscope ranks flagged rank %d, slowed by model/layer.3/op.1, and no other\n",
              slow_rank);

  // Where the listing's time goes: one ListRanks, and one one-rank GetReport (it makes 1024).
  const double list_ms = MedianMs(repeats, [&] {
    if (absl::Status status = daemon.ListRanks("many").status(); !status.ok()) {
      Die(status.ToString());
    }
  });
  v1::ReportRequest one_rank;
  one_rank.set_job_id("many");
  one_rank.add_ranks(many_ranks / 2);
  const double one_report_ms = MedianMs(repeats, [&] {
    if (absl::Status status = daemon.GetReport(one_rank).status(); !status.ok()) {
      Die(status.ToString());
    }
  });
  (*server)->Shutdown();
  fs::remove_all(dir);

  char what[96];
  std::snprintf(what, sizeof what, "GetReport, %d ranks x %llu kernels (median of %d):", ranks,
                static_cast<unsigned long long>(big_kernels / ranks), repeats);
  PrintAgainstTarget(what, report_ms, 200);
  std::snprintf(what, sizeof what, "flopscope ranks, %d ranks (median of %d):", many_ranks,
                repeats);
  PrintAgainstTarget(what, ranks_ms, 1000);
  std::printf("  of which: ListRanks %.1f ms; GetReport of one rank %.2f ms (x %d ranks)\n",
              list_ms, one_report_ms, many_ranks);
  std::printf("report_bench: report_ms=%.1f ranks_ms=%.1f\n", report_ms, ranks_ms);
  return 0;
}
