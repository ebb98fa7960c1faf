#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace flopscope::injector {

// The clock of range timestamps. A push/pop pair reads it twice, so its cost is a large part of
// the injector's overhead: clock_gettime costs ~16 ns where the TSC costs ~7 ns (measured on the
// development VM). When the kernel itself keeps time with an invariant TSC (clocksource "tsc"),
// records carry raw TSC ticks and the exporter converts them to CLOCK_REALTIME ns with a
// calibration it refreshes every cycle; otherwise records carry CLOCK_REALTIME ns and the
// conversion is the identity. FLOPSCOPE_CLOCK=realtime forces the latter.
class RangeClock {
 public:
  enum class Source { kTsc, kRealtime };

  // kTsc when the CPU's TSC is invariant and the kernel's clocksource is "tsc".
  static Source Detect();
  static int64_t RealtimeNs() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  }

  explicit RangeClock(Source source);

  Source source() const { return source_; }
  // A raw timestamp; any thread.
  uint64_t Read() const {
#if defined(__x86_64__)
    if (source_ == Source::kTsc) return __rdtsc();
#endif
    return static_cast<uint64_t>(RealtimeNs());
  }

  // Exporter thread only: takes a fresh (ticks, ns) pair. Call before converting a cycle.
  void Calibrate();
  // Exporter thread only: a raw timestamp as CLOCK_REALTIME ns.
  int64_t ToRealtimeNs(uint64_t raw) const;

 private:
  struct Point {
    uint64_t ticks = 0;
    int64_t ns = 0;
  };
  static Point Sample();

  const Source source_;
  Point origin_;  // taken at construction
  Point latest_;  // the newest calibration; conversions are anchored here
  double ns_per_tick_ = 0;
};

}  // namespace flopscope::injector
