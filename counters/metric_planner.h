#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "counters/metric_catalog.h"
#include "counters/profiler_host_api.h"

namespace flopscope::counters {

// What the range profiler will collect on one chip, and what it costs.
struct MetricPlan {
  std::string chip;
  MetricSetKind kind = MetricSetKind::kFull;
  std::vector<std::string> metrics;  // accepted candidates, in collection order
  // (metric, CUPTI's result text) for each candidate the chip rejected.
  std::vector<std::pair<std::string, std::string>> rejected;
  uint32_t passes = 0;                // kernel-replay passes, from cuptiProfilerHostGetNumOfPasses
  std::vector<uint8_t> config_image;  // for cuptiRangeProfilerSetConfig
};

// Turns a chip's candidate metrics (metric_catalog.h) into a plan through the Profiler Host API.
// No GPU needed. Each Plan costs one host object per candidate (a few ms each), so plan once per
// chip and availability image, not per context switch. Not thread-safe; the api table must be
// complete (ProfilerHostApi::Complete).
class MetricPlanner {
 public:
  explicit MetricPlanner(const ProfilerHostApi& api);

  // The catalog's candidates for `chip` and `kind`, validated and planned. `counter_availability`
  // (cuptiProfilerGetCounterAvailability of the device, unmodified: CUPTI does not validate it)
  // may be null: planning from the chip name alone. False with `error` set when the chip has no
  // family entry (the message names the chip and lists the chips that have one: the caller collects
  // timing only), when CUPTI cannot configure the chip, or when no candidate is accepted.
  bool Plan(std::string_view chip, MetricSetKind kind, const uint8_t* counter_availability,
            size_t availability_size, MetricPlan* out, std::string* error);

  // The same for an explicit candidate list (duplicates dropped): what Plan does after the
  // catalog lookup, and the seam tests use to inject a bad name.
  bool PlanMetrics(std::string_view chip, MetricSetKind kind,
                   const std::vector<std::string>& candidates, const uint8_t* counter_availability,
                   size_t availability_size, MetricPlan* out, std::string* error);

  // Tries each of `candidates` (duplicates dropped) on a throw-away host object of its own: one
  // rejected name poisons an object for every later add (cupti.md §2), so a shared object would
  // reject the rest of the list too. The accepted names go to `accepted` in order, the others
  // with CUPTI's result text to `rejected`. False with `error` set when CUPTI cannot configure
  // the chip at all.
  bool TryEachAlone(std::string_view chip, const std::vector<std::string>& candidates,
                    const uint8_t* counter_availability, size_t availability_size,
                    std::vector<std::string>* accepted,
                    std::vector<std::pair<std::string, std::string>>* rejected, std::string* error);

  // The chip names this libcupti's Host API supports (cuptiProfilerHostGetSupportedChips).
  bool SupportedChips(std::vector<std::string>* out, std::string* error);

 private:
  std::string UnknownChipMessage(std::string_view chip);

  ProfilerHostApi api_;
};

}  // namespace flopscope::counters
