#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::importer {

// Steps and phases go in the `flopscope` NVTX domain (DESIGN: Time); every other annotation is a
// module range in the default domain.

enum class RangeRole : uint8_t { kModule, kStep, kPhase };

struct AnnotationRole {
  RangeRole role = RangeRole::kModule;
  // For steps and phases: "step", "forward", "backward" or "optimizer". Empty for modules.
  absl::string_view flopscope_name;
  int64_t step_number = -1;  // N of ProfilerStep#N
};

// How a framework annotation reads:
//   "ProfilerStep#N"                                  -> step N
//   "forward" / "backward" / "optimizer", also written "## forward ##" (any case)  -> that phase
//   "Optimizer.step#<Class>.step" (PyTorch's optimizer record_function)          -> optimizer
//   anything else                                                                 -> a module
// Nesting is RangeNester's business: a phase inside an open phase of the same name (PyTorch's
// "Optimizer.step#SGD.step" inside a user's "## optimizer ##") is demoted to a module there.
AnnotationRole ClassifyAnnotation(absl::string_view name);

}  // namespace flopscope::importer
