#pragma once

#include <string>

#include "client/model/profile_model.h"

namespace flopscope::client {

struct ProfileTextOptions {
  int depth = -1;  // aggregated profile: depths 0 .. depth - 1 (DeepSpeed's module_depth; -1: all
                   // but the deepest, as DeepSpeed prints them); the detailed profile is whole
  int top = 1;     // aggregated profile: top modules per depth (DeepSpeed's top_modules)
};

// `flopscope report` for a terminal: first exactly the DeepSpeed Flops Profiler's
// print_model_profile layout, line for line (summary, aggregated and detailed sections, closing
// rule; numbers by deepspeed_format.h; zeros where DeepSpeed prints zeros), so that the two
// diff; then flopscope's additions in a section of their own (RenderAdditions). A summary
// figure that is not known prints "-" and the reason; an estimate is labelled. The detailed
// section prints the model root's tree (the root with the most params); other roots (loss,
// data loader, optimizer) are listed in the additions, never in the model's 100 %.
std::string RenderProfileText(const Profile& profile, const ProfileTextOptions& options);

// What DeepSpeed does not print: the job and the steps, the measured step range, MFU, device,
// where FLOPs come from (and why they are 0), counted windows and FLOPs by precision, fwd and
// bwd latency per module, the roots outside the model.
std::string RenderAdditions(const Profile& profile);

// Module `index`'s line of the detailed section, unindented ("(name): Class(figures)", the root
// "Class(figures)"); "" for a module outside the model's tree. The HTML report's hover text.
std::string DetailedRow(const Profile& profile, size_t index);

// The three sections on their own (the group views compose them).
std::string RenderSummary(const Profile& profile);
std::string RenderAggregated(const Profile& profile, const ProfileTextOptions& options);
std::string RenderDetailed(const Profile& profile, const ProfileTextOptions& options);

// The summary's counted-FLOPs part: which steps were counted on which ranks, the FP16
// convention, and the FLOPs by precision per GPU and step for the whole job and each top-level
// module. Empty when there are no counter windows and no counted FLOPs.
std::string RenderCountedFlops(const Profile& profile);

}  // namespace flopscope::client
