#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flopscope::client {

// `flopscope counters`: which hardware counters the injector collects on a chip and what they
// cost, answered by CUPTI's Profiler Host API on this machine (no GPU needed).
struct CountersOptions {
  std::string chip;          // --chip, e.g. GH100 or H100 (chip_names.h)
  std::string set = "full";  // --set full|cheap
  std::string format = "text";
  bool list_chips = false;  // --list-chips
  std::string cupti_path;   // FLOPSCOPE_CUPTI_PATH: the libcupti to ask ("" = search)
};

// The listing for `options`. INVALID_ARGUMENT (exit 2) for a bad --set/--format, for neither or
// both of --chip/--list-chips, for a name that is no chip nor product (the message lists both),
// and for a chip with no metric set (the message lists the chips that have one);
// FAILED_PRECONDITION when libcupti cannot be loaded (or this build has no CUPTI); INTERNAL when
// CUPTI fails to plan a chip it should know.
absl::StatusOr<std::string> RenderCounters(const CountersOptions& options);

// RenderCounters written to `out`.
absl::Status CountersCommand(const CountersOptions& options, std::ostream& out);

}  // namespace flopscope::client
