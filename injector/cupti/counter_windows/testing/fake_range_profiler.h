#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/range_profiler_api.h"

namespace flopscope::injector::cupti::testing {

// A scripted CUPTI range profiler (one at a time per process, installed by the constructor).
// It keeps a profiler object per context and plays the GPU's part: while a context's profiler
// is started, KernelRuns(context, tag) makes one auto range (the tag stands for the kernel's
// counters, see FakeCounterBackend). DecodeData writes the ranges into the counter data image
// the collector gave SetConfig, in the layout that GetCounterDataInfo, GetRangeInfo and the fake
// evaluator read back:
//   uint64 ranges, uint64 tags[ranges]
// Range names are consecutive ordinals per context, as auto range names them.
class FakeRangeProfiler {
 public:
  FakeRangeProfiler();
  ~FakeRangeProfiler();
  FakeRangeProfiler(const FakeRangeProfiler&) = delete;
  FakeRangeProfiler& operator=(const FakeRangeProfiler&) = delete;

  RangeProfilerApi Api() const;

  // The GPU: a kernel launched on `context` ran. Captured when its profiler is started (beyond
  // the image's capacity it is dropped, as CUPTI drops ranges).
  void KernelRuns(CUcontext context, uint64_t tag);
  bool started(CUcontext context) const;

  // Scripted answers.
  CUptiResult initialize_result = CUPTI_SUCCESS;
  CUptiResult availability_result = CUPTI_SUCCESS;
  CUptiResult enable_result = CUPTI_SUCCESS;
  CUptiResult start_result = CUPTI_SUCCESS;
  CUptiResult decode_result = CUPTI_SUCCESS;
  CUptiResult stop_result = CUPTI_SUCCESS;
  // A refused Disable leaves the object enabled on its context (stopped), as CUPTI might.
  CUptiResult disable_result = CUPTI_SUCCESS;
  bool all_pass_submitted = true;  // Stop's isAllPassSubmitted
  // SetConfig refuses a maxRangesPerPass above this (0: any), as CUPTI is reported to.
  uint32_t refuse_ranges_above = 0;
  std::deque<size_t> extra_dropped;  // numOfRangeDropped added at successive decodes
  bool skip_a_name = false;          // names jump by 2 once (a range CUPTI lost in between)
  // Runs inside cuptiRangeProfilerStart, as another thread's launch (or a CUPTI callback)
  // arriving while the collector is switching a profiler would.
  std::function<void()> during_start;

  // What the collector did, in order: "enable", "set_config", "start", "stop", "decode",
  // "initialize_image", "disable", "push", "pop" (each with the context's number: "start 1";
  // "pop" with the number of the context it took off the thread).
  std::vector<std::string> calls;
  int initializations = 0;
  uint32_t max_ranges = 0;               // as given to GetCounterDataSize
  uint32_t max_ranges_per_pass = 0;      // as given to the last SetConfig
  std::vector<CUcontext> current;        // pushed with cuCtxPushCurrent (one thread's stack)
  bool auto_range_kernel_replay = true;  // every SetConfig asked for auto range + kernel replay

  struct Object {
    CUcontext context = nullptr;
    int number = 0;  // 1, 2, ... in order of first enable: keeps the call log readable
    bool started = false;
    uint8_t* image = nullptr;
    size_t image_size = 0;
    std::vector<uint64_t> captured;
    uint64_t next_name = 0;
  };
  std::map<CUcontext, Object> objects;  // enabled profilers
  std::map<CUcontext, int> numbers;

  // Keeps GetRangeInfo's names alive.
  std::deque<std::string> names;
};

}  // namespace flopscope::injector::cupti::testing
