// bench/trace_export: how long `flopscope export` takes for a job of 1M kernels and how much
// memory it needs, against an in-process daemon filled through its Collector service like real
// producers (bench/report_bench_jobs.h: a model of 24 layers x 12 ops, 100 steps, steps 50-51
// counted). Both formats are exported through the real client path (ExportTrace: GetTrace over
// the daemon's socket, the writers, the file); the process's peak RSS is reset before each
// export (/proc/self/clear_refs), so the figure is what the export added on top of the daemon:
// GetTrace's chunks, the writer's tracks and names, never the records. The last line is
//   trace_export_bench: kernels=N perfetto_s=X perfetto_peak_mb=Y chrome_s=Z chrome_peak_mb=W
//
//   trace_export [--kernels 1000000] [--keep-data]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/report_bench_jobs.h"
#include "client/connect/daemon_client.h"
#include "client/trace_export/export_command.h"
#include "daemon/server/daemon_server.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "trace_export: %s\n", what.c_str());
  std::exit(1);
}

// VmHWM of this process in MiB (peak resident set since start or the last reset).
double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

double CurrentRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets VmHWM to the current RSS (Linux 4.0+)
}

struct Run {
  double seconds = 0;
  double peak_mb = 0;
  double base_mb = 0;
};

Run Export(const flopscope::client::DaemonClient& daemon, const std::string& format,
           const fs::path& out) {
  flopscope::client::ExportOptions options;
  options.job_id = "big";
  options.format = format;
  options.output = out.string();
  ResetPeakRss();
  Run run;
  run.base_mb = CurrentRssMb();
  const auto start = Clock::now();
  absl::StatusOr<flopscope::client::ExportSummary> summary =
      flopscope::client::ExportTrace(daemon, options);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.peak_mb = PeakRssMb();
  if (!summary.ok()) Die(summary.status().ToString());
  std::printf(
      "%-8s %8.2f s  peak RSS %7.1f MB (%+.1f MB over the %.1f MB before)  %llu ranges, "
      "%llu activities, %llu flows, %.1f MB file\n",
      format.c_str(), run.seconds, run.peak_mb, run.peak_mb - run.base_mb, run.base_mb,
      static_cast<unsigned long long>(summary->ranges),
      static_cast<unsigned long long>(summary->activities),
      static_cast<unsigned long long>(summary->flows),
      static_cast<double>(summary->bytes) / (1 << 20));
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flopscope export: time and memory for a job of N kernels"};
  int kernels = 1'000'000;
  bool keep_data = false;
  app.add_option("--kernels", kernels, "kernels of the job (default 1000000)")
      ->check(CLI::Range(100, 100'000'000));
  app.add_flag("--keep-data", keep_data, "leave the data directory and the traces");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir =
      fs::temp_directory_path() / ("flopscope-export-bench-" + std::to_string(getpid()));
  auto server = flopscope::bench::StartBenchDaemon(dir);
  if (!server.ok()) Die(server.status().ToString());

  constexpr int kSteps = 100;
  const flopscope::bench::RankShape big{.job = "big",
                                        .steps = kSteps,
                                        .kernels_per_step = kernels / kSteps,
                                        .layers = 24,
                                        .ops_per_layer = 12,
                                        .counted_first = 50,
                                        .counted_last = 51};
  const auto start = Clock::now();
  flopscope::bench::FillJob((*server)->target(), big, 1, 1);
  std::printf("filled job 'big': 1 rank x %d kernels in %.1f s\n", big.kernels_per_step * kSteps,
              std::chrono::duration<double>(Clock::now() - start).count());

  const flopscope::client::DaemonClient daemon((*server)->options().socket_path);
  const Run perfetto = Export(daemon, "perfetto", dir / "big.pftrace");
  const Run chrome = Export(daemon, "chrome", dir / "big.json");
  std::printf(
      "trace_export_bench: kernels=%d perfetto_s=%.2f perfetto_peak_mb=%.1f "
      "chrome_s=%.2f chrome_peak_mb=%.1f\n",
      big.kernels_per_step * kSteps, perfetto.seconds, perfetto.peak_mb - perfetto.base_mb,
      chrome.seconds, chrome.peak_mb - chrome.base_mb);
  (*server)->Shutdown();
  if (!keep_data) fs::remove_all(dir);
  return 0;
}
