#pragma once

#include <string>
#include <vector>

#include "flopscope/v1/query.pb.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Metadata keys the injector sets itself (injector/cupti): `gpu.status` (the kernel tracing
// outcome, newer than the hello's when the session began before CUDA did), `gpu.<index>.<field>`
// (device facts; fields name, chip, sm_count, sm_clock_khz, memory_bytes, compute_capability,
// uuid) and `kernels.launch_not_seen`.
inline constexpr char kGpuStatusKey[] = "gpu.status";
inline constexpr char kLaunchNotSeenKey[] = "kernels.launch_not_seen";

// Whether `key` is one of the above (reports show them in the rank lines, not as announcements).
bool IsInjectorGpuKey(const std::string& key);

// Applies a rank's metadata to its listing: the latest gpu.status replaces the hello's, and each
// device described by gpu.<index>.* fills (or adds) the device of that index. Malformed numbers
// are ignored.
void ApplyGpuMetadata(const std::vector<v1::Metadata>& metadata, v1::RankInfo* rank);

}  // namespace flopscope::daemon
