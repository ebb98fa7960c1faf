#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/model/profile_model.h"
#include "client/model/rank_stragglers.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// What `flopscope ranks` shows of one rank beyond its RankInfo: its profile (BuildProfile of its
// own report) and, when it is slower than its peers, why.
struct RankFigures {
  Profile profile;
  std::optional<Straggler> straggler;
  std::string problem;  // why the rank's report could not be read (its figures are then empty)
};

// `flopscope ranks JOB`: one line per rank — rank, host, pid, device, parallel coordinates,
// connected, time per step, fwd / bwd / optimizer step latency, fwd+bwd FLOPS per GPU, MFU,
// memory (what its tensors held / what the formula expects, "!" above it: memory_view.h),
// kernels, lost records and, for the stragglers, how long the others waited for the rank and
// where (a module's forward or backward, or between steps), or how much slower than the median
// its step is and the module that makes it slow — and below the table one line per rank the
// others waited for, saying it in words, the memory parts above their formula (MemoryFlagLines,
// ranks with the same figures on one line), once per
// distinct status why ranks have no GPU
// records, then one line per rank whose report could not be read or whose usual file the daemon
// left alone (its figures come from the file beside it). `figures` is empty (timing
// columns show "-") or holds one entry per rank, in order.
std::string RenderRanksText(const flopscope::v1::ListRanksResponse& ranks,
                            const std::vector<RankFigures>& figures = {});

// `flopscope ranks JOB --format json`:
//   {"ranks": [{"rank": n, "host": "", "pid": n, "devices": [""], "tp_rank": n, "pp_rank": n,
//               "dp_rank": n, "world_size": n, "sessions": n, "connected": bool, "ranges": n,
//               "kernels": n, "lost": n, "gpu_status": "",
//               "steps": n, "step_s": x|null, "fwd_s": x|null, "bwd_s": x|null,
//               "opt_s": x|null, "flops_per_s": x|null, "mfu": x|null, "mfu_note": "",
//               "problem": "", "memory": null | {memory_view.h's WriteMemoryJson},
//               "straggler": null | {"step_s": x, "median_step_s": x, "excess_pct": x,
//                                    "module": "", "module_excess_s": x,
//                                    "cause": "waited_for" | "slower_step",
//                                    "pass": "forward" | "backward" | "between_steps" | "",
//                                    "waited_s": x}}]}
// Latencies are seconds per step; mfu a fraction; waited_s 0 for a slower step (Straggler). The
// figures' keys are absent when `figures` is empty.
std::string RenderRanksJson(const flopscope::v1::ListRanksResponse& ranks,
                            const std::vector<RankFigures>& figures = {});

}  // namespace flopscope::client
