#include "importer/time_base.h"

#include "absl/strings/str_cat.h"

namespace flopscope::importer {
namespace {

// 2000-01-01T00:00:00Z, the daemon's earliest accepted timestamp, plus a day of margin.
constexpr int64_t kEarliestNs = (946'684'800LL + 86'400LL) * 1'000'000'000LL;

// True when [min + offset, max + offset] lies in [earliest, latest], overflow-safe.
bool Fits(int64_t min_ns, int64_t max_ns, int64_t offset, int64_t latest_ns) {
  int64_t low = 0;
  int64_t high = 0;
  if (__builtin_add_overflow(min_ns, offset, &low) ||
      __builtin_add_overflow(max_ns, offset, &high)) {
    return false;
  }
  return low >= kEarliestNs && high <= latest_ns;
}

}  // namespace

absl::StatusOr<TimeBase> ChooseTimeBase(int64_t min_ns, int64_t max_ns,
                                        std::optional<int64_t> base_ns, bool base_is_required,
                                        absl::Time now) {
  // The daemon allows a day into the future; staying at `now` leaves that day as margin.
  const int64_t latest_ns = absl::ToUnixNanos(now);
  if (base_ns.has_value() && base_is_required && Fits(min_ns, max_ns, *base_ns, latest_ns)) {
    return TimeBase{*base_ns, "session start"};
  }
  if (Fits(min_ns, max_ns, 0, latest_ns)) return TimeBase{0, "epoch"};
  if (base_ns.has_value() && Fits(min_ns, max_ns, *base_ns, latest_ns)) {
    return TimeBase{*base_ns, "baseTimeNanoseconds"};
  }
  if (Fits(min_ns, max_ns, kAnchorNs, latest_ns)) {
    return TimeBase{kAnchorNs, "anchored at 2020-01-01 (trace clock is not epoch time)"};
  }
  int64_t shift = 0;
  if (!__builtin_sub_overflow(kAnchorNs, min_ns, &shift) &&
      Fits(min_ns, max_ns, shift, latest_ns)) {
    return TimeBase{shift, "shifted to start at 2020-01-01 (trace clock is not epoch time)"};
  }
  int64_t span = 0;
  const std::string length = __builtin_sub_overflow(max_ns, min_ns, &span)
                                 ? std::string("more than 292 years")
                                 : absl::StrCat(span / 1'000'000'000, " s");
  return absl::InvalidArgumentError(
      absl::StrCat("the trace spans ", length,
                   ", more than fits between 2000-01-01 and now (corrupt timestamps?)"));
}

}  // namespace flopscope::importer
