// bench/nvtx_overhead: what the injector adds to one NVTX push+pop pair.
//
// In ONE process: a loop module whose NVTX instance was initialised with no tool (NVTX's own
// no-op path) and an identical module whose instance was initialised with
// NVTX_INJECTION64_PATH=libflopscope_inject.so. Rounds alternate between the two; each injected
// burst is really buffered and exported (by default through the gRPC transport to an in-process
// Collector); waiting for the export to finish between rounds is not timed.
//
// Two clocks per burst: the calling thread's CPU time (what the job's thread pays; not inflated
// when other processes share the machine, which on a small shared box dominates wall time) and
// wall time. The CPU of the other threads (exporter, transport, in-process Collector) is
// reported per exported record as background cost. The final line
// `nvtx_overhead: added_ns_per_pair=X` is the thread-CPU figure (medians over rounds).
#include <dlfcn.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "injector/test_hooks.h"
#include "injector/transport/testing/fake_collector.h"

namespace {

using Clock = std::chrono::steady_clock;
using PairsFn = void (*)(long, const char*);
using flopscope::transport::testing::FakeCollector;

struct Options {
  int rounds = 30;
  long pairs = 100000;
  std::string sink = "collector";
  std::string injector = NVTX_OVERHEAD_INJECTOR;
};

struct Burst {
  double cpu_ns_per_pair;
  double wall_ns_per_pair;
};

// Per-round figures of one loop module.
struct Series {
  std::vector<double> cpu, wall;
  void Add(const Burst& burst) {
    cpu.push_back(burst.cpu_ns_per_pair);
    wall.push_back(burst.wall_ns_per_pair);
  }
};

PairsFn LoadLoop(const char* path) {
  void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    std::fprintf(stderr, "nvtx_overhead: cannot load %s: %s\n", path, dlerror());
    std::exit(1);
  }
  return reinterpret_cast<PairsFn>(dlsym(module, "nvtx_overhead_pairs"));
}

int64_t CpuNs(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

Burst TimeBurst(PairsFn loop, long pairs) {
  const int64_t cpu_start = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  const auto wall_start = Clock::now();
  loop(pairs, "layer");
  const auto wall = std::chrono::duration<double, std::nano>(Clock::now() - wall_start).count();
  const auto cpu = static_cast<double>(CpuNs(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
  return Burst{cpu / static_cast<double>(pairs), wall / static_cast<double>(pairs)};
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

flopscope_test_stats Stats(flopscope_test_get_stats_fn get_stats) {
  flopscope_test_stats stats{};
  get_stats(&stats);
  return stats;
}

// Untimed: lets the exporter drain and send what the last burst buffered.
bool WaitForExport(flopscope_test_get_stats_fn get_stats) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    const flopscope_test_stats stats = Stats(get_stats);
    if (stats.records_exported + stats.buffer_full_drops >= stats.records_buffered) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Untimed: lets the last batches reach the Collector before they are counted.
void WaitForDelivery(FakeCollector* collector, uint64_t records) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (collector->received_records() < records && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

flopscope_test_get_stats_fn StatsHook(const std::string& injector_path) {
  void* injector = dlopen(injector_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  return injector == nullptr ? nullptr
                             : reinterpret_cast<flopscope_test_get_stats_fn>(
                                   dlsym(injector, "flopscope_test_get_stats"));
}

void PrintReport(const Options& options, const Series& plain, const Series& injected,
                 double background_ns_per_record, const flopscope_test_stats& stats,
                 FakeCollector* collector) {
  const double plain_cpu = Median(plain.cpu);
  const double injected_cpu = Median(injected.cpu);
  const double added = injected_cpu - plain_cpu;
  std::printf("sink: %s; pairs per burst: %ld; rounds: %d (medians)\n", options.sink.c_str(),
              options.pairs, options.rounds);
  std::printf("without injector (NVTX no-op): %8.2f ns/pair thread CPU, %8.2f ns/pair wall\n",
              plain_cpu, Median(plain.wall));
  std::printf("with injector:                 %8.2f ns/pair thread CPU, %8.2f ns/pair wall\n",
              injected_cpu, Median(injected.wall));
  std::printf("added: %.2f ns/pair thread CPU (ratio %.1fx), %.2f ns/pair wall\n", added,
              injected_cpu / plain_cpu, Median(injected.wall) - Median(plain.wall));
  std::printf("background CPU of the other threads: %.2f ns per exported record\n",
              background_ns_per_record);
  std::printf("records buffered %llu, exported %llu, dropped (buffer full) %llu\n",
              static_cast<unsigned long long>(stats.records_buffered),
              static_cast<unsigned long long>(stats.records_exported),
              static_cast<unsigned long long>(stats.buffer_full_drops));
  if (collector != nullptr) {
    std::printf("received by the collector: %llu records\n",
                static_cast<unsigned long long>(collector->received_records()));
  }
  std::printf("nvtx_overhead: added_ns_per_pair=%.2f\n", added);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"ns added by libflopscope_inject.so per NVTX push+pop pair"};
  app.add_option("--rounds", options.rounds, "alternating rounds (median taken)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--pairs", options.pairs, "push+pop pairs per timed burst")
      ->check(CLI::Range(1L, 100000000L));
  app.add_option("--sink", options.sink, "collector (gRPC to an in-process Collector) or dump")
      ->check(CLI::IsMember({"collector", "dump"}));
  app.add_option("--injector", options.injector, "path of libflopscope_inject.so");
  CLI11_PARSE(app, argc, argv);

  // The no-op copy must initialise before any tool is named.
  unsetenv("NVTX_INJECTION64_PATH");
  const PairsFn plain = LoadLoop(NVTX_OVERHEAD_LOOP_PLAIN);
  plain(1, "init");

  std::unique_ptr<FakeCollector> collector;
  char socket_dir[] = "/tmp/nvtx-overhead-XXXXXX";
  if (options.sink == "collector") {
    if (mkdtemp(socket_dir) == nullptr) return 1;
    const std::string socket = std::string(socket_dir) + "/collector.sock";
    FakeCollector::Behaviour behaviour;
    behaviour.keep = false;
    collector = std::make_unique<FakeCollector>(socket, behaviour);
    setenv("FLOPSCOPE_SOCKET", socket.c_str(), 1);
  } else {
    setenv("FLOPSCOPE_DEBUG_DUMP", "/dev/null", 1);
  }
  setenv("NVTX_INJECTION64_PATH", options.injector.c_str(), 1);
  const PairsFn injected = LoadLoop(NVTX_OVERHEAD_LOOP_INJECTED);
  injected(1, "init");

  const flopscope_test_get_stats_fn get_stats = StatsHook(options.injector);
  if (get_stats == nullptr || Stats(get_stats).session_started == 0) {
    std::fprintf(stderr, "nvtx_overhead: the injector did not start a session\n");
    return 1;
  }

  plain(options.pairs, "warmup");
  injected(options.pairs, "layer");
  WaitForExport(get_stats);
  Series plain_series, injected_series;
  const int64_t process_cpu_start = CpuNs(CLOCK_PROCESS_CPUTIME_ID);
  const int64_t thread_cpu_start = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t exported_start = Stats(get_stats).records_exported;
  for (int round = 0; round < options.rounds; ++round) {
    plain_series.Add(TimeBurst(plain, options.pairs));
    injected_series.Add(TimeBurst(injected, options.pairs));
    if (!WaitForExport(get_stats)) {
      std::fprintf(stderr, "nvtx_overhead: export did not keep up within 30 s\n");
      return 1;
    }
  }
  const flopscope_test_stats stats = Stats(get_stats);
  if (collector != nullptr) WaitForDelivery(collector.get(), stats.records_exported);
  const double background_ns =
      static_cast<double>((CpuNs(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start) -
                          (CpuNs(CLOCK_THREAD_CPUTIME_ID) - thread_cpu_start));
  const auto exported = static_cast<double>(stats.records_exported - exported_start);
  PrintReport(options, plain_series, injected_series, exported > 0 ? background_ns / exported : 0.0,
              stats, collector.get());
  return 0;
}
