#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace flopscope::importer {

// Kineto writes `ts` and `dur` as microseconds with a nanosecond fraction
// ("1712195495406752.797"). A double cannot hold that exactly (its step at 1.7e15 is 0.25 us), so
// timestamps are converted from their text: integer digits, then up to three fraction digits as
// nanoseconds, the rest rounded half-up. Exponents ("1.5e3") and plain integers are accepted.
// Returns nullopt for text that is not a JSON number or does not fit in int64 nanoseconds.
std::optional<int64_t> MicrosTextToNanos(absl::string_view text);

}  // namespace flopscope::importer

namespace flopscope::importer {

// The raw text of the scalar values of the top-level members "ts" and "dur" of one event object
// (already validated JSON), found in a single pass that skips nested values and strings; empty
// views for members that are absent or not scalars. Lets timestamps keep their exact digits
// while the event itself is parsed by simdjson.
struct EventTimeText {
  absl::string_view ts;
  absl::string_view dur;
};
EventTimeText FindEventTimeText(absl::string_view object_json);

}  // namespace flopscope::importer
