#pragma once

#include <string>

#include "client/profile_model.h"

namespace flopscope::client {

struct ProfileTextOptions {
  int depth = -1;  // detailed profile: modules down to this depth (-1: all)
  int top = 1;     // aggregated profile: top modules per depth (DeepSpeed's top_modules)
};

// `flopscope report` for a terminal, laid out like the DeepSpeed Flops Profiler's output:
// "Profile Summary", "Aggregated Profile per GPU" and "Detailed Profile per GPU", every number
// formatted by deepspeed_format.h. A figure that is not known prints "-" and the reason; an
// estimate is labelled. The first line is "flopscope report: job <id>".
std::string RenderProfileText(const Profile& profile, const ProfileTextOptions& options);

// The three sections on their own (the group views compose them).
std::string RenderSummary(const Profile& profile);
std::string RenderAggregated(const Profile& profile, const ProfileTextOptions& options);
std::string RenderDetailed(const Profile& profile, const ProfileTextOptions& options);

// The summary's counted-FLOPs part: which steps were counted on which ranks, the FP16
// convention, and the FLOPs by precision per GPU and step for the whole job and each top-level
// module. Empty when there are no counter windows and no counted FLOPs.
std::string RenderCountedFlops(const Profile& profile);

}  // namespace flopscope::client
