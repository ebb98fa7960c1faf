#include "injector/ranges/range_clock.h"

#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace flopscope::injector {
namespace {

// The slope is measured over at least this long; shorter spans would make it imprecise.
constexpr int64_t kMinCalibrationSpanNs = 2000000;  // 2 ms

bool InvariantTsc() {
#if defined(__x86_64__)
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1u << 8)) != 0;
#else
  return false;
#endif
}

bool KernelKeepsTimeWithTsc() {
  FILE* file = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (file == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, file) != nullptr;
  std::fclose(file);
  return read && std::strcmp(name, "tsc\n") == 0;
}

}  // namespace

RangeClock::Source RangeClock::Detect() {
  return InvariantTsc() && KernelKeepsTimeWithTsc() ? Source::kTsc : Source::kRealtime;
}

RangeClock::RangeClock(Source source) : source_(source) {
  if (source_ == Source::kTsc) {
    origin_ = Sample();
    latest_ = origin_;
  }
}

RangeClock::Point RangeClock::Sample() {
  // The TSC read on both sides of clock_gettime; the tightest of a few tries pins the pair best.
  Point best;
  uint64_t best_width = UINT64_MAX;
  for (int attempt = 0; attempt < 5; ++attempt) {
#if defined(__x86_64__)
    const uint64_t before = __rdtsc();
    const int64_t ns = RealtimeNs();
    const uint64_t after = __rdtsc();
#else
    const uint64_t before = 0, after = 0;
    const int64_t ns = RealtimeNs();
#endif
    if (after - before < best_width) {
      best_width = after - before;
      best = Point{before + (after - before) / 2, ns};
    }
  }
  return best;
}

void RangeClock::Calibrate() {
  if (source_ != Source::kTsc) return;
  Point now = Sample();
  // Only at the first calibration of a very short process: wait out the minimum span.
  while (now.ns - origin_.ns < kMinCalibrationSpanNs) now = Sample();
  if (now.ticks <= origin_.ticks) return;  // a TSC that went backwards: keep the old slope
  latest_ = now;
  ns_per_tick_ = static_cast<double>(latest_.ns - origin_.ns) /
                 static_cast<double>(latest_.ticks - origin_.ticks);
}

int64_t RangeClock::ToRealtimeNs(uint64_t raw) const {
  if (source_ != Source::kTsc) return static_cast<int64_t>(raw);
  const double delta_ticks = raw >= latest_.ticks ? static_cast<double>(raw - latest_.ticks)
                                                  : -static_cast<double>(latest_.ticks - raw);
  return latest_.ns + static_cast<int64_t>(delta_ticks * ns_per_tick_);
}

}  // namespace flopscope::injector
