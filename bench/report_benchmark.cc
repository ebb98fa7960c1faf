// bench/report_benchmark: how fast the daemon answers the report questions of issue 5, against an
// in-process daemon (DaemonServer) filled through its Collector service like real producers
// (bench/report_bench_jobs.h):
//   1. GetReport for a job of 8 ranks x 1M kernels (target < 200 ms): the report is built from
//      the per-module aggregates kept at ingest plus one pass over the range events (GPU span,
//      per-step phase medians), so it must not grow with the kernel count. The model has 24
//      layers of 12 ops (313 modules, about 32k range events per rank); steps 50-51 ran in a
//      counter window (their records are marked counted and 10x slower);
//   2. the same with a step window (`report --steps 40:59`): per-module medians per step from
//      the range events; the run fails unless the counted steps are left out and named;
//   3. the `flopscope ranks` listing (RenderRanksListing: one GetRankReports, the profiles and
//      the straggler analysis) over 1024 small ranks (target < 1 s). One of them is planted
//      as a straggler: the run fails unless exactly it is flagged, with the right module.
// Prints each median with its target and whether it was met; the last line is
//   report_bench: report_ms=X steps_ms=Y ranks_ms=Z
//
//   report_benchmark [--ranks 8] [--kernels-per-rank 1000000] [--layers 24] [--ops-per-layer 12]
//                    [--many-ranks 1024] [--repeats 5] [--keep-data]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/report_bench_jobs.h"
#include "client/commands/ranks_command.h"
#include "client/connect/daemon_client.h"
#include "daemon/server/daemon_server.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = flopscope::v1;
using flopscope::bench::RankShape;
using Clock = std::chrono::steady_clock;

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

// Median milliseconds of `repeats` runs of `body` after one warm-up run (its time in `first_ms`).
template <typename Body>
double MedianMs(int repeats, Body body, double* first_ms = nullptr) {
  const auto first = Clock::now();
  body();
  if (first_ms != nullptr) *first_ms = MillisecondsSince(first);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    body();
    times.push_back(MillisecondsSince(start));
  }
  return Median(times);
}

void PrintAgainstTarget(const char* what, double ms, double target_ms) {
  std::printf("%-56s %9.1f ms  (target < %.0f ms: %s)\n", what, ms, target_ms,
              ms < target_ms ? "met" : "MISSED");
}

const v1::ModuleStats* FindModule(const v1::Report& report, const std::string& path) {
  for (const v1::ModuleStats& module : report.modules()) {
    if (module.path() == path) return &module;
  }
  return nullptr;
}

// 1. The whole-run report of the big job; it must count every uncounted kernel.
double TimeReport(const flopscope::client::DaemonClient& daemon, const RankShape& big, int ranks,
                  int repeats) {
  v1::ReportRequest request;
  request.set_job_id(big.job);
  const uint64_t expected = flopscope::bench::UncountedKernels(big) * ranks;
  // Every counted kernel carries the same FLOPs (report_bench_jobs.cc): per counted step and
  // summed over the ranks, the model holds all of a step's kernels.
  const double expected_flops =
      static_cast<double>(ranks) * big.kernels_per_step * flopscope::bench::kFlopsPerCountedKernel;
  return MedianMs(repeats, [&] {
    absl::StatusOr<v1::Report> report = daemon.GetReport(request);
    if (!report.ok()) Die(report.status().ToString());
    uint64_t kernels = 0;
    double flops = 0;
    for (const v1::ModuleStats& module : report->modules()) {
      if (module.depth() == 0) kernels += module.kernels();
      if (module.depth() == 0) flops += module.flops();
    }
    if (std::abs(flops - expected_flops) > 1e-9 * expected_flops) {
      Die("the report counts " + std::to_string(flops) + " FLOPs per counted step; expected " +
          std::to_string(expected_flops));
    }
    if (kernels != expected || report->modules_size() != flopscope::bench::ModuleCount(big)) {
      Die("the report counts " + std::to_string(kernels) + " kernels in " +
          std::to_string(report->modules_size()) + " modules; " + std::to_string(expected) +
          " uncounted kernels were sent");
    }
  });
}

// 2. Steps 40-59 of the big job: medians per step, with the counted steps 50-51 left out.
double TimeStepWindow(const flopscope::client::DaemonClient& daemon, const RankShape& big,
                      int ranks, int repeats) {
  v1::ReportRequest request;
  request.set_job_id(big.job);
  request.set_first_step(40);
  request.set_last_step(59);
  // Uncounted steps run their kernels back to back, 500 ns each: the model is busy that long.
  const int64_t model_busy_ns = static_cast<int64_t>(big.kernels_per_step) * 500;
  return MedianMs(repeats, [&] {
    absl::StatusOr<v1::Report> report = daemon.GetReport(request);
    if (!report.ok()) Die(report.status().ToString());
    const v1::StepWindow& steps = report->steps();
    const v1::ModuleStats* model = FindModule(*report, "model");
    if (steps.uncounted_steps() != static_cast<uint32_t>(18 * ranks) ||
        steps.counted_steps_size() != 2 || steps.counted_steps(0) != big.counted_first ||
        model == nullptr || model->step_latency().median_ns() != model_busy_ns ||
        model->step_latency().max_ns() != model_busy_ns) {
      Die("steps 40:59: " + report->steps().ShortDebugString() + "; model " +
          (model == nullptr ? "missing" : model->step_latency().ShortDebugString()));
    }
  });
}

// 3. The `flopscope ranks` listing; exactly the planted straggler must be flagged. The first
// listing opens every rank file (`first_ms`); the daemon keeps them open for the next ones.
double TimeRanksListing(const flopscope::client::DaemonClient& daemon, const RankShape& many,
                        int many_ranks, int repeats, double* first_ms) {
  flopscope::client::RanksOptions options;
  options.job_id = many.job;
  auto list = [&] {
    absl::StatusOr<std::string> listing = flopscope::client::RenderRanksListing(daemon, options);
    if (!listing.ok()) Die(listing.status().ToString());
    const size_t lines = std::count(listing->begin(), listing->end(), '\n');
    if (lines < static_cast<size_t>(many_ranks) + 2) {
      Die("the listing has " + std::to_string(lines) + " lines for " + std::to_string(many_ranks) +
          " ranks");
    }
  };
  const double ms = MedianMs(repeats, list, first_ms);
  absl::StatusOr<flopscope::client::RankListing> listing =
      flopscope::client::FetchRankListing(daemon, many.job, {}, {});
  if (!listing.ok()) Die(listing.status().ToString());
  const v1::ListRanksResponse* listed = &listing->ranks;
  const std::vector<flopscope::client::RankFigures>* figures = &listing->figures;
  const std::string culprit = flopscope::bench::OpModulePath(many, many.slow_op);
  for (int i = 0; i < listed->ranks_size(); ++i) {
    const auto& straggler = (*figures)[i].straggler;
    const bool planted = listed->ranks(i).rank() == many.slow_rank;
    if (planted != straggler.has_value() || (planted && straggler->module != culprit)) {
      Die("rank " + std::to_string(listed->ranks(i).rank()) + ": straggler " +
          (straggler ? straggler->module : "none") + ", expected " + (planted ? culprit : "none"));
    }
  }
  std::printf("flopscope ranks flagged rank %d, slowed by %s, and no other\n", many.slow_rank,
              culprit.c_str());
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flopscope report benchmark"};
  int ranks = 8;
  int kernels_per_rank = 1'000'000;
  int layers = 24;
  int ops_per_layer = 12;
  int many_ranks = 1024;
  int repeats = 5;
  bool keep_data = false;
  app.add_option("--ranks", ranks, "ranks of the big job")->check(CLI::Range(1, 1024));
  app.add_option("--kernels-per-rank", kernels_per_rank, "kernels per rank of the big job")
      ->check(CLI::Range(10'000, 100'000'000));
  app.add_option("--layers", layers, "layers of the big job's model")->check(CLI::Range(1, 1000));
  app.add_option("--ops-per-layer", ops_per_layer, "ops per layer of the big job's model")
      ->check(CLI::Range(1, 100));
  app.add_option("--many-ranks", many_ranks, "ranks of the listing job")
      ->check(CLI::Range(2, 100'000));
  app.add_option("--repeats", repeats, "timed runs per figure (the median is printed)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--keep-data", keep_data, "leave the daemon's data directory for inspection");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir =
      fs::temp_directory_path() / ("flopscope-report-bench-" + std::to_string(getpid()));
  auto server = flopscope::bench::StartBenchDaemon(dir);
  if (!server.ok()) Die(server.status().ToString());
  const flopscope::daemon::DaemonOptions& options = (*server)->options();
  const std::string target = (*server)->target();

  constexpr int kSteps = 100;
  const RankShape big{.job = "big",
                      .world_size = ranks,
                      .steps = kSteps,
                      .kernels_per_step = kernels_per_rank / kSteps,
                      .layers = layers,
                      .ops_per_layer = ops_per_layer,
                      .counted_first = 50,
                      .counted_last = 51};
  auto start = Clock::now();
  flopscope::bench::FillJob(target, big, ranks, ranks);
  std::printf("filled job 'big': %d ranks x %d kernels, %d modules, in %.1f s\n", ranks,
              big.kernels_per_step * kSteps, flopscope::bench::ModuleCount(big),
              MillisecondsSince(start) / 1000);
  const RankShape many{.job = "many",
                       .world_size = many_ranks,
                       .steps = 2,
                       .kernels_per_step = 64,
                       .slow_rank = many_ranks / 3,
                       // In the step's first third, its forward phase (AddPhases): `ranks`
                       // compares modules pass by pass, and this job's module ranges run on a
                       // thread of their own, outside the backward phase's.
                       .slow_op = 5};
  start = Clock::now();
  flopscope::bench::FillJob(target, many, many_ranks, 8);
  std::printf("filled job 'many': %d ranks x 128 kernels in %.1f s\n", many_ranks,
              MillisecondsSince(start) / 1000);

  const flopscope::client::DaemonClient daemon(options.socket_path);
  const double report_ms = TimeReport(daemon, big, ranks, repeats);
  const double steps_ms = TimeStepWindow(daemon, big, ranks, repeats);
  double first_listing_ms = 0;
  const double ranks_ms = TimeRanksListing(daemon, many, many_ranks, repeats, &first_listing_ms);
  // Where the listing's time goes: its one GetRankReports stream, the rest the client's.
  v1::ReportRequest all_ranks;
  all_ranks.set_job_id(many.job);
  all_ranks.set_omit_step_times(true);
  const double stream_ms = MedianMs(repeats, [&] {
    int answers = 0;
    absl::Status status = daemon.GetRankReports(all_ranks, [&](v1::RankReport) { ++answers; });
    if (!status.ok() || answers != many_ranks) Die("GetRankReports: " + status.ToString());
  });
  (*server)->Shutdown();
  if (keep_data) {
    std::printf("data kept in %s\n", options.data_dir.c_str());
  } else {
    fs::remove_all(dir);
  }

  char what[128];
  std::snprintf(what, sizeof what, "GetReport, %d ranks x %d kernels (median of %d):", ranks,
                big.kernels_per_step * kSteps, repeats);
  PrintAgainstTarget(what, report_ms, 200);
  std::snprintf(what, sizeof what, "GetReport --steps 40:59, same job (median of %d):", repeats);
  std::printf("%-56s %9.1f ms\n", what, steps_ms);
  std::snprintf(what, sizeof what, "flopscope ranks, %d ranks (median of %d):", many_ranks,
                repeats);
  PrintAgainstTarget(what, ranks_ms, 1000);
  std::printf("  of which: GetRankReports of all %d ranks %.1f ms\n", many_ranks, stream_ms);
  std::printf(
      "  the first listing after the job (read connections opened as the ranks connected): "
      "%.1f ms\n",
      first_listing_ms);
  std::printf("report_bench: report_ms=%.1f steps_ms=%.1f ranks_ms=%.1f\n", report_ms, steps_ms,
              ranks_ms);
  return 0;
}
