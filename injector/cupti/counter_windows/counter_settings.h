#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "counters/metric_catalog.h"
#include "injector/records/identity.h"

namespace flopscope::injector::cupti {

// The counter windows FLOPSCOPE_COUNTERS asks for, in step ordinals as the process sees them
// (0-based: the first `step` range of the process is step 0).
//   steps=3            count step 3
//   steps=3-4          count steps 3 and 4 (one window)
//   every=500          count one step every 500: steps 500, 1000, 1500, ...
//   every=500,steps=2  count 2 steps every 500: 500-501, 1000-1001, ...
//   set=full|cheap     the metric set (default full: every precision including tensor-core
//                      FLOPs by source type, 5-10 kernel-replay passes; cheap: CUDA-core FLOPs,
//                      time and tensor instruction counts in 2 passes, no tensor FLOPs); alone,
//                      it only sets the default of the daemon's on-demand windows
// Comma-separated, in any order.
struct EnvWindows {
  bool any = false;
  // steps=A[-B] without every: one window.
  int64_t first = -1, last = -1;
  // every=E: windows [n*E, n*E + count - 1] for n = 1, 2, ...; count from steps=N (default 1).
  int64_t every = 0;
  int64_t count = 1;
};

struct CounterSettings {
  EnvWindows windows;
  // Full by default: measured FLOPs must include the tensor cores, where training spends them.
  counters::MetricSetKind metric_set = counters::MetricSetKind::kFull;
  std::string text;  // FLOPSCOPE_COUNTERS as given, for the window records' trigger
  // FLOPSCOPE_COUNTER_RANGES: launches per counter data image; when a window's launches fill
  // it, the profiler is stopped and decoded, then restarted (a decode costs host time). When
  // CUPTI refuses an image this large, the context retries once with half (gpu-review D6).
  uint32_t max_ranges = kDefaultMaxRanges;
  // Processes in the job (WORLD_SIZE, else OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS; 1 when
  // unset). Above 1 a window must keep every communication kernel out of kernel replay or stop
  // (gpu-review D1): its peers would wait for a kernel that replay holds back.
  uint32_t world_size = 1;
  std::vector<std::string> warnings;

  bool multi_rank() const { return world_size > 1; }

  // NVIDIA's samples use 10-20 ranges, Kineto 1500, and SetConfig is reported to refuse some
  // 2000-3000 (gpu-review D6). Memory decides: on an H200 (GH100, the full set) the counter data
  // image took 286,565,612 bytes for 512 ranges, about 560 KB a range (GPU acceptance,
  // 2026-11-26), and a context holds it twice (the profiler's and the decoded copy) plus once per
  // decoded pass waiting for the exporter. 64 ranges are ~36 MB; a decode per 64 launches costs
  // little next to kernel replay (a torch step's passes end at each memcpy/memset anyway).
  static constexpr uint32_t kDefaultMaxRanges = 64;
  // The most steps one window may count (the daemon refuses longer windows' records).
  static constexpr int64_t kMaxWindowSteps = 10000;
  static constexpr uint32_t kMinRanges = 16;
  static constexpr uint32_t kMaxRanges = 65536;
};

// Reads FLOPSCOPE_COUNTERS and FLOPSCOPE_COUNTER_RANGES. Unset: no windows from the environment
// (the daemon can still ask for some). Malformed: one warning, no environment windows, and the
// job runs as usual.
CounterSettings CounterSettingsFromEnvironment(const EnvLookup& env);

// Parses FLOPSCOPE_COUNTERS's value into *settings (windows and set). False with `error` (what is
// wrong and what is expected) and *settings untouched when malformed.
bool ParseCounterWindows(std::string_view text, CounterSettings* settings, std::string* error);

}  // namespace flopscope::injector::cupti
