#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// The metadata key a framework uses to announce its parallel layout through the `flopscope`
// NVTX domain (docs/architecture.md: metadata channel), e.g. Megatron's parallel state read by
// the PyTorch hooks.
inline constexpr char kParallelKey[] = "parallel";

// Parses the value of a `parallel` mark: space-separated `key=value` pairs among tp, pp, dp,
// tp_rank, pp_rank, dp_rank (any order, unknown keys ignored so frameworks may add more). Sizes
// default to 1 and coordinates to 0 when absent; a size of 0, a coordinate outside its size or a
// value that is not a number is INVALID_ARGUMENT. The result's source is "nvtx".
absl::StatusOr<v1::ParallelLayout> ParseParallelMark(absl::string_view value);

}  // namespace flopscope::daemon
