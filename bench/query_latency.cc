// bench/query_latency: how long a running daemon takes to answer `report` and `ranks`, seen from
// one client process that stays up (issue 15: "report and ranks answering in under 1 s" while
// 64 ranks stream). A `flopscope` command also pays for its own process start, which on a
// saturated machine can take seconds by itself; this keeps one channel open and times only the
// calls, so the daemon's answer is measured apart from the exec of the client.
//
//   query_latency --socket DIR/s.sock --job JOB [--duration-s 40] [--period-ms 500]
//
// SIGINT or SIGTERM ends the rounds early and still prints the summary (load.sh's PROBE=1 stops
// it when the job ends).
//
// Each round: GetRankReports (what `flopscope ranks` sends), then GetReport over
// steps 1: (what `flopscope report` sends by default). Prints one line per round and, at the
// end, the count, median and max of each, over the rounds after the job was first found.

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/connect/daemon_client.h"

namespace {

struct Timings {
  std::vector<double> seconds;
  int failed = 0;

  void Add(const absl::Status& status, absl::Duration took) {
    if (status.ok()) {
      seconds.push_back(absl::ToDoubleSeconds(took));
    } else {
      ++failed;
    }
  }
  void Print(const char* name) const {
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    const double max = sorted.empty() ? 0 : sorted.back();
    const long over = std::count_if(sorted.begin(), sorted.end(), [](double s) { return s > 1; });
    std::printf("%-7s %3zu calls, %d failed, median %.3f s, max %.3f s, over 1 s: %ld\n", name,
                sorted.size(), failed, median, max, over);
  }
};

// `flopscope ranks`: every rank's report, each with its rank's listing, in one stream.
absl::Status Ranks(const flopscope::client::DaemonClient& daemon, const std::string& job) {
  flopscope::v1::ReportRequest request;
  request.set_job_id(job);
  request.set_omit_step_times(true);
  return daemon.GetRankReports(request, [](flopscope::v1::RankReport) {});
}

// `flopscope report` with its default window (step 0 is warm-up).
absl::Status Report(const flopscope::client::DaemonClient& daemon, const std::string& job) {
  flopscope::v1::ReportRequest request;
  request.set_job_id(job);
  request.set_omit_step_times(true);
  request.set_first_step(1);
  absl::StatusOr<flopscope::v1::Report> report = daemon.GetReport(request);
  if (!report.ok() && absl::IsInvalidArgument(report.status())) {
    request.clear_first_step();  // a job with one step so far: its whole run, as the CLI does
    report = daemon.GetReport(request);
  }
  return report.status();
}

volatile std::sig_atomic_t stop_requested = 0;

void RequestStop(int) { stop_requested = 1; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"times report and ranks against a running daemon from one client process"};
  std::string socket;
  std::string job;
  double duration_s = 40;
  int period_ms = 500;
  app.add_option("--socket", socket, "the daemon's socket")->required();
  app.add_option("--job", job, "the job to query")->required();
  app.add_option("--duration-s", duration_s, "how long to keep querying");
  app.add_option("--period-ms", period_ms, "pause between two rounds");
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
  const flopscope::client::DaemonClient daemon(socket);
  Timings ranks;
  Timings report;
  bool found = false;  // rounds count from the first that finds the job
  const absl::Time start = absl::Now();
  while (!stop_requested && absl::Now() - start < absl::Seconds(duration_s)) {
    const absl::Time ranks_start = absl::Now();
    const absl::Status ranks_status = Ranks(daemon, job);
    const absl::Duration ranks_took = absl::Now() - ranks_start;
    found = found || ranks_status.ok();
    if (found) {
      ranks.Add(ranks_status, ranks_took);
      const absl::Time report_start = absl::Now();
      const absl::Status report_status = Report(daemon, job);
      const absl::Duration report_took = absl::Now() - report_start;
      report.Add(report_status, report_took);
      std::printf("%8.3f ranks %.3f s %s, report %.3f s %s\n",
                  absl::ToDoubleSeconds(ranks_start - start), absl::ToDoubleSeconds(ranks_took),
                  std::string(ranks_status.message()).c_str(), absl::ToDoubleSeconds(report_took),
                  std::string(report_status.message()).c_str());
      std::fflush(stdout);
    }
    absl::SleepFor(absl::Milliseconds(period_ms));
  }
  ranks.Print("ranks");
  report.Print("report");
  return 0;
}
