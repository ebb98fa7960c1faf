#pragma once

// What /metrics says about one rank's progress, kept current from the batches it commits (never
// read back from SQLite): its latest step time, the FLOPs of its latest counted step, the GPU it
// runs on, and the achieved FLOPS and MFU those give. Everything here is O(1) memory per rank:
// at most kMaxStepPathsPerSession step path ids per session, the last kMaxCountedSteps counted
// steps.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon::metrics {

// Figures of one rank at one moment; absent ones are not exported.
struct RankFigures {
  uint64_t steps = 0;                  // `step` ranges ingested, counted ones included
  std::optional<double> step_seconds;  // the latest uncounted step, push to pop
  std::optional<double> step_flops;    // FLOPs counted in the latest counted step, all kernels
  std::string step_precision;          // its dominant counted precision ("tensor:bf16...")
  std::optional<double> achieved_flops_per_s;  // step_flops / step_seconds
  std::optional<double> mfu;                   // achieved over the device's dense peak
};

// Not thread-safe; the registry guards each instance.
class RankActivity {
 public:
  // How many sessions of one rank keep their step path ids, and how many counted steps are
  // kept: bounds, not expectations (a rank normally has one session and one window at a time).
  static constexpr size_t kMaxSessions = 16;
  static constexpr size_t kMaxStepPathsPerSession = 64;  // a producer may define odd trees
  static constexpr size_t kMaxCountedSteps = 4;

  // Takes in a committed batch of session `session_id` (validated: ids refer to definitions).
  void Observe(std::string_view session_id, const v1::Batch& batch);
  // The device FLOPS are measured against (the hello's first device, else `gpu.0.name` metadata).
  void SetDeviceName(std::string name) { device_name_ = std::move(name); }
  const std::string& device_name() const { return device_name_; }

  RankFigures Figures() const;

 private:
  void LearnStepPaths(std::string_view session_id, const v1::Batch& batch);
  void ObserveSteps(const absl::flat_hash_set<uint64_t>& step_paths, const v1::Batch& batch);
  void ObserveFlops(const v1::Batch& batch);

  // Per session: ids of the paths that are `step` ranges of the `flopscope` domain.
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> step_paths_;
  uint64_t steps_ = 0;
  int64_t latest_step_start_ns_ = INT64_MIN;
  std::optional<double> latest_step_seconds_;
  // Counted step ordinal -> FLOPs by precision ("fp64", "fp32", "fp16", "tensor:<source>").
  std::map<int64_t, std::map<std::string, double>> counted_steps_;
  std::string device_name_;
};

}  // namespace flopscope::daemon::metrics
