// bench/launch_overhead: what kernel tracing adds per kernel, measured without a GPU.
//
// One process runs a real injector session (records exported to /dev/null through the debug
// dump sink) and a real KernelTracer whose CUPTI answers are scripted (no driver here), so both
// halves of the per-kernel cost run the production code:
//  - launch: KernelTracer::OnCallback for the API enter and exit of one launch, with three
//    module ranges open (what the job's launching thread pays);
//  - record: the activity record's way to the session: CUPTI's buffer handed over
//    (OnBufferRequested / OnBufferCompleted: the real cuptiActivityGetNextRecord walk, name
//    interning, the join) and Collect moving it into a session buffer (on CUPTI's and the
//    exporter's threads in a job; timed here on one thread).
// For comparison, an NVTX push+pop pair through the same session's range tracker. The tracer
// carries counter windows as in production (CounterCollector, scripted range profiler): the
// launch figure is the cost outside windows, and a last phase times the launch callback inside
// a window (the CPU bookkeeping only; kernel replay's GPU time is not part of it).
//
// Figures are the calling thread's CPU time (not inflated by other processes on a shared
// machine), medians over rounds. The last line, `launch_overhead: ns_per_kernel=X`, is launch
// plus record.
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/counter_windows/testing/fake_counter_backend.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/cupti/counter_windows/testing/fake_range_profiler.h"
#include "injector/kernel_api_sink.h"
#include "injector/session.h"

namespace {

using flopscope::injector::KernelApiSink;
using flopscope::injector::Session;
using flopscope::injector::cupti::CounterCollector;
using flopscope::injector::cupti::CounterSettings;
using flopscope::injector::cupti::KernelTracer;
using flopscope::injector::cupti::TracerOptions;
using flopscope::injector::cupti::testing::ActivityBufferBuilder;
using flopscope::injector::cupti::testing::FakeCounterBackend;
using flopscope::injector::cupti::testing::FakeCupti;
using flopscope::injector::cupti::testing::FakeRangeProfiler;

constexpr uint32_t kLaunchCbid = 307;        // cuLaunchKernel
constexpr size_t kKernelsPerBuffer = 16384;  // 3.4 MiB of Kernel10 records: fits one buffer
const char* const kNames[] = {"_Z4gemmPfS_S_iii", "_Z7softmaxPfi",  "_Z9layernormPKfPfi",
                              "_Z4geluPf",        "_Z7dropoutPfS_", "_Z6reducePfS_i",
                              "_Z9attentionPfS_", "_Z4copyPfS_"};

int64_t ThreadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

int g_context_storage = 0;  // stands for the CUcontext the launches run on
const CUcontext kContext = reinterpret_cast<CUcontext>(&g_context_storage);

void Launch(FakeCupti& fake, uint32_t correlation_id) {
  CUpti_CallbackData data{};
  data.functionName = "cuLaunchKernel";
  data.symbolName = "_Z4gemmPfS_S_iii";
  data.correlationId = correlation_id;
  data.context = kContext;
  data.callbackSite = CUPTI_API_ENTER;
  fake.callback(fake.userdata, CUPTI_CB_DOMAIN_DRIVER_API, kLaunchCbid, &data);
  CUresult returned = CUDA_SUCCESS;
  data.functionReturnValue = &returned;
  data.callbackSite = CUPTI_API_EXIT;
  fake.callback(fake.userdata, CUPTI_CB_DOMAIN_DRIVER_API, kLaunchCbid, &data);
}

// The launch callback inside a counter window (the GPU's replay excluded): per kernel, median.
double LaunchInWindow(FakeCupti& fake, KernelTracer& tracer, uint32_t* next_id, long kernels,
                      int rounds) {
  std::vector<double> per_kernel;
  for (int round = 1; round <= rounds; ++round) {  // every=1 counts steps 1, 2, ...
    tracer.counter_windows()->OnStepBegin(round);
    const int64_t start = ThreadCpuNs();
    for (long i = 0; i < kernels; ++i) Launch(fake, (*next_id)++);
    per_kernel.push_back(static_cast<double>(ThreadCpuNs() - start) / kernels);
    tracer.counter_windows()->OnStepEnd(round);
    Launch(fake, (*next_id)++);  // stops the profiler, as the next step's first launch would
    tracer.Collect(false);       // evaluates the window's passes (outside the timing)
  }
  return Median(per_kernel);
}

// CUPTI's side of a buffer (filling it) is not ours to time: the records are laid out up front.
std::vector<ActivityBufferBuilder> BuildBuffers(uint32_t first_id, long kernels) {
  std::vector<ActivityBufferBuilder> buffers;
  for (long i = 0; i < kernels; ++i) {
    if (i % kKernelsPerBuffer == 0) buffers.emplace_back();
    ActivityBufferBuilder::Kernel kernel;
    kernel.correlation_id = first_id + static_cast<uint32_t>(i);
    kernel.name = kNames[i % (sizeof kNames / sizeof kNames[0])];
    kernel.start = 1'700'000'000'000'000'000ull + static_cast<uint64_t>(i) * 1000;
    kernel.end = kernel.start + 800;
    buffers.back().AddKernel(kernel);
  }
  return buffers;
}

// The record path of `buffers`; returns this thread's CPU ns.
int64_t DeliverAndCollect(std::vector<ActivityBufferBuilder>& buffers, KernelTracer& tracer) {
  int64_t spent = 0;
  for (ActivityBufferBuilder& records : buffers) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    int64_t start = ThreadCpuNs();
    KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
    spent += ThreadCpuNs() - start;
    if (buffer == nullptr || size < records.size()) return -1;
    const size_t valid = records.CopyTo(buffer);  // CUPTI's work
    start = ThreadCpuNs();
    KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, valid);
    spent += ThreadCpuNs() - start;
  }
  const int64_t start = ThreadCpuNs();
  tracer.Collect(false);
  return spent + ThreadCpuNs() - start;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  long kernels = 50000;
  CLI::App app{"launch_overhead: kernel tracing's cost per kernel, without a GPU"};
  app.add_option("--rounds", rounds, "timed rounds (medians are reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--kernels", kernels, "kernels per round")->check(CLI::Range(1000L, 10000000L));
  CLI11_PARSE(app, argc, argv);

  // A session of its own, exporting to /dev/null; kernel tracing is the bench's tracer below.
  setenv("FLOPSCOPE_DEBUG_DUMP", "/dev/null", 1);
  setenv("FLOPSCOPE_BUFFER_MB", "2048", 1);
  setenv("FLOPSCOPE_JOB_ID", "launch-overhead", 1);
  setenv("FLOPSCOPE_KERNELS", "0", 1);
  Session* session = Session::StartOnce();
  if (session == nullptr) {
    std::fprintf(stderr, "launch_overhead: no injector session\n");
    return 1;
  }
  FakeCupti fake;
  fake.callback_names = {{{CUPTI_CB_DOMAIN_DRIVER_API, kLaunchCbid}, "cuLaunchKernel"}};
  KernelApiSink sink;
  TracerOptions options;
  options.buffer_cap_bytes = 64ull << 20;
  // As MakeKernelTracing builds it: counter windows ride on the tracer (every step counted when
  // asked, none open meanwhile); the range profiler and Host API are scripted.
  FakeRangeProfiler profiler;
  CounterSettings settings;
  std::string error;
  if (!flopscope::injector::cupti::ParseCounterWindows("every=1", &settings, &error)) return 1;
  KernelTracer tracer(&sink, options, fake.Api(),
                      flopscope::injector::cupti::LaunchRing::kDefaultSlots,
                      std::make_unique<CounterCollector>(&sink, settings, profiler.Api(),
                                                         std::make_unique<FakeCounterBackend>()));
  if (!tracer.Attach().tracing) {
    std::fprintf(stderr, "launch_overhead: the tracer did not attach\n");
    return 1;
  }
  auto& tracker = session->tracker();
  const auto* domain = session->domains().Default();
  for (const char* name : {"Model", "layers.0", "attn"}) tracker.Push(domain, name);

  std::vector<double> launch_ns, record_ns, nvtx_ns;
  uint32_t next_id = 1;
  for (int round = -1; round < rounds; ++round) {  // round -1 warms up
    std::vector<ActivityBufferBuilder> buffers = BuildBuffers(next_id, kernels);
    int64_t start = ThreadCpuNs();
    for (long i = 0; i < kernels; ++i) Launch(fake, next_id + static_cast<uint32_t>(i));
    const int64_t launch = ThreadCpuNs() - start;
    next_id += static_cast<uint32_t>(kernels);
    const int64_t record = DeliverAndCollect(buffers, tracer);
    if (record < 0) {
      std::fprintf(stderr, "launch_overhead: CUPTI buffer refused or too small\n");
      return 1;
    }
    start = ThreadCpuNs();
    for (long i = 0; i < kernels; ++i) {
      tracker.Push(domain, "mlp");
      tracker.Pop(domain);
    }
    const int64_t nvtx = ThreadCpuNs() - start;
    if (round < 0) continue;
    launch_ns.push_back(static_cast<double>(launch) / kernels);
    record_ns.push_back(static_cast<double>(record) / kernels);
    nvtx_ns.push_back(static_cast<double>(nvtx) / kernels);
  }
  const auto counters = tracer.JoinCounters();
  const double launch = Median(launch_ns), record = Median(record_ns), nvtx = Median(nvtx_ns);
  CUpti_ResourceData created{};
  created.context = kContext;
  fake.context_devices = {{&g_context_storage, 0}};
  fake.chips = {{0, "GH100"}};
  fake.callback(fake.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                &created);
  const double in_window = LaunchInWindow(fake, tracer, &next_id, kernels, rounds);
  std::printf("launch_overhead: %d rounds x %ld kernels, thread CPU time, medians\n", rounds,
              kernels);
  std::printf("  NVTX push+pop pair (range tracker, for comparison): %8.1f ns\n", nvtx);
  std::printf("  launch callback, enter+exit (launching thread):      %8.1f ns per kernel\n",
              launch);
  std::printf("    (counter windows supported, none open: one relaxed load of it)\n");
  std::printf("  the same inside a counter window (CPU bookkeeping):  %8.1f ns per kernel\n",
              in_window);
  std::printf("  activity record: parse, intern, join, enqueue:       %8.1f ns per kernel\n",
              record);
  std::printf("  joined to their launch range: %llu of %llu kernels\n",
              static_cast<unsigned long long>(counters.by_launch),
              static_cast<unsigned long long>(counters.by_launch + counters.launch_not_seen));
  std::printf("  target: under 200 ns per kernel\n");
  std::printf("launch_overhead: ns_per_kernel=%.1f\n", launch + record);
  return 0;
}
