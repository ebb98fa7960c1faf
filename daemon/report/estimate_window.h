// The estimated FLOPs a report shows for a step window: the torch hooks announce
// `estimated_flops <path>` / `estimated_macs <path>` only when a figure changes, and a figure
// holds for every later step (docs/marks.md). A report over steps A..B therefore takes, per path,
// the figure in effect in each of those steps and their median, like every other per-step figure.
#pragma once

#include <cstdint>
#include <vector>

#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Replaces one rank's estimate marks by one mark per key: the median over the window's steps of
// the figure in effect at each step's end (the last mark at or before it; steps before a key's
// first mark have no figure and are left out). The new mark goes at the end of `metadata`, with
// the last window step's end as its time; a key with no figure in the window is dropped. Other
// marks are kept in order. `window_step_ends_ns` empty (no step marked): nothing changes.
void WindowEstimates(const std::vector<int64_t>& window_step_ends_ns,
                     std::vector<v1::Metadata>* metadata);

}  // namespace flopscope::daemon
