#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace flopscope::importer {

// The daemon stores Unix-epoch nanoseconds and rejects any timestamp before 2000-01-01 or more
// than a day in the future. Traces use other clocks: Kineto writes microseconds since an
// arbitrary base (often the host's monotonic clock, with `baseTimeNanoseconds` saying where it
// starts), Nsight Systems nanoseconds since the session start. The offset added to every
// timestamp of one file is chosen, in this order:
//   1. required base (Nsight's session start): base, when it puts the trace inside the window;
//   2. the trace is already epoch time: 0;
//   3. Kineto's baseTimeNanoseconds, when it puts the trace inside the window;
//   4. otherwise a fixed anchor (2020-01-01T00:00:00Z) added as is, so ranks recorded on the same
//      clock keep their relative alignment;
//   5. and if even that leaves the window, the trace is shifted to start at the anchor.
// Only relative order and durations are meaningful after 4 or 5, which `how` says.
struct TimeBase {
  int64_t offset_ns = 0;
  std::string how;  // for metadata import.time_base
};

inline constexpr int64_t kAnchorNs = 1'577'836'800LL * 1'000'000'000LL;  // 2020-01-01T00:00:00Z

// INVALID_ARGUMENT when the trace spans more time than the window holds.
absl::StatusOr<TimeBase> ChooseTimeBase(int64_t min_ns, int64_t max_ns,
                                        std::optional<int64_t> base_ns, bool base_is_required,
                                        absl::Time now);

}  // namespace flopscope::importer
