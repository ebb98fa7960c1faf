#pragma once

#include <cuda.h>
#include <cupti_result.h>

#include <cstdint>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/range_profiler_api.h"

namespace flopscope::injector::cupti {

// A CUPTI call that failed, for the window record and one stderr line.
struct CuptiFailure {
  std::string call;  // "cuptiRangeProfilerEnable"
  CUptiResult result = CUPTI_SUCCESS;
  std::string text;  // CUPTI's name for the result
};

// One sentence: the cause and that timing goes on ("GPU performance counters are busy (DCGM
// profiling or another profiler holds them): no FLOPs counted, timing continues").
std::string DescribeCounterFailure(const CuptiFailure& failure);

// A counter data image after cuptiRangeProfilerDecodeData, copied out of the profiler so the
// exporter thread can evaluate it while the profiler goes on with a fresh one.
struct DecodedImage {
  std::vector<uint8_t> image;
  size_t dropped = 0;  // CUPTI's numOfRangeDropped
};

// One CUDA context's range profiler in auto-range, kernel-replay mode (cupti.md §3.1): every
// kernel launched on the context while it runs becomes one range, replayed once per pass.
//
//   Begin:   Enable -> counter data image for `max_ranges` -> SetConfig -> Start; when the
//            image, SetConfig or Start fails, once more with half the ranges (gpu-review D6)
//   EndPass: Stop (all passes submitted, or the pass failed: D13) -> DecodeData -> copy image
//   Resume:  re-initialise the image -> SetConfig -> Start (the window goes on; D12)
//   Disable
//
// No lock and not thread-safe: the counter collector lets one thread at a time drive a context
// (its `transitioning` flag) and never holds a lock of ours around these calls, because CUPTI
// may call back into the tracer from inside any of them. Never throws; failures are returned.
class ContextProfiler {
 public:
  ContextProfiler(const RangeProfilerApi* api, CUcontext context) : api_(api), context_(context) {}
  ~ContextProfiler() { Disable(nullptr); }
  ContextProfiler(const ContextProfiler&) = delete;
  ContextProfiler& operator=(const ContextProfiler&) = delete;

  // cuptiProfilerGetCounterAvailability for `context` (asked twice: size, then data).
  static bool CounterAvailability(const RangeProfilerApi& api, CUcontext context,
                                  std::vector<uint8_t>* out, CuptiFailure* failure) noexcept;

  bool Begin(const CounterPlan& plan, uint32_t max_ranges, CuptiFailure* failure) noexcept;
  // Leaves the profiler stopped, whether it succeeds or not.
  bool EndPass(DecodedImage* out, CuptiFailure* failure) noexcept;
  bool Resume(CuptiFailure* failure) noexcept;
  // Stops a started pass without decoding it, then disables. The object is gone either way;
  // false (and the first failure in `failure`, when given) if CUPTI refused either call: the
  // profiler may then stay on the context, its later kernels replayed or untimed.
  bool Disable(CuptiFailure* failure) noexcept;

  bool started() const { return started_; }
  CUcontext context() const { return context_; }
  // The ranges one pass holds (what Begin settled on): the pass must end before more launches.
  uint32_t max_ranges() const { return max_ranges_; }

  // Below this a halved image is not tried: the window would decode after every few launches.
  static constexpr uint32_t kMinRetryRanges = 16;

 private:
  bool Call(const char* name, CUptiResult result, CuptiFailure* failure) const;
  // Sizes and initialises an image for `ranges`, then SetConfig and Start.
  bool StartWithImage(uint32_t ranges, CuptiFailure* failure);
  bool InitializeImage(CuptiFailure* failure);
  bool SetConfig(CuptiFailure* failure);
  bool Start(CuptiFailure* failure);

  const RangeProfilerApi* const api_;
  const CUcontext context_;
  CUpti_RangeProfiler_Object* object_ = nullptr;  // set between Enable and Disable
  std::vector<std::string> metrics_;              // the plan's, for GetCounterDataSize
  std::vector<uint8_t> config_;                   // the plan's config image, for every SetConfig
  std::vector<uint8_t> image_;                    // the counter data image SetConfig was given
  uint32_t max_ranges_ = 0;
  bool started_ = false;
};

}  // namespace flopscope::injector::cupti
