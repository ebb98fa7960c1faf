#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/model/profile_model.h"

namespace flopscope::client {

// `flopscope diff JOB_A JOB_B`: per module (matched by path), latency, FLOPs and FLOPS per step
// before (A) and after (B), sorted by impact: the absolute change of latency, largest first
// (ties by path). A module present in one job only has the other side absent.
struct ModuleDiff {
  std::string path;
  std::optional<double> latency_a, latency_b;  // seconds per step
  std::optional<double> flops_a, flops_b;      // per step
  double impact_s = 0;                         // |latency_b - latency_a|, the present side alone
};

std::vector<ModuleDiff> DiffProfiles(const Profile& a, const Profile& b);

// text: a table plus the iteration latency and fwd+bwd FLOPS before and after;
// both over the same --steps window as `report` (medians per step, warm-up left out by default);
// json: {"a": "", "b": "", "iter_latency_s": {"a": x|null, "b": x|null},
//        "steps": {"a": {"first": n, "last": n, "note": ""}, "b": {...}},
//        "modules": [{"path": "", "latency_s_a": x|null, "latency_s_b": x|null, "flops_a": ..,
//                     "flops_b": .., "flops_per_s_a": .., "flops_per_s_b": .., "impact_s": x}]}
std::string RenderDiff(const Profile& a, const Profile& b, const std::vector<ModuleDiff>& rows,
                       const std::string& format);

}  // namespace flopscope::client
