#pragma once

#include <string>

#include "client/model/profile_model.h"
#include "common/json/json_writer.h"

namespace flopscope::client {

// `flopscope report --format json` adds "profile" to the report document:
//   "profile": {"scope": "", "world_size": n, "dp_size": n, "mp_size": n, "steps": n,
//     "batch_size": n|null, "device": ""|null, "precision": "", "flops_source": "",
//     "counted_ranks": n, "flops_by_precision": [{"precision": "fp32", "flops": x}],
//     "fp16_convention": "", "counter_windows": [{"rank": n, "first_step": n, "last_step": n,
//       "metric_set": "", "passes": n, "kernels_counted": n, "ranges_unmatched": n,
//       "status": ""}],
//     "summary": {"<figure>": {"value": x|null, "note": ""}},   // params_per_gpu, ..., mfu
//     "memory": [each rank's memory ledger, memory_view.h's WriteMemoryJson],
//     "modules": [{"path": "", "class": "", "depth": n, "name": "", "model_path": "",
//                  "ran": bool, "container": bool, "figures_from_children": bool,
//                  "note": ""|null, "params": x|null, "macs": x|null,
//                  "flops": x|null, "flops_announced": bool, "latency_s": x,
//                  "flops_per_s": x|null, "flops_per_s_note": "",
//                  "flops_by_precision": [...], "counted_steps": n, "counted_kernels": n}]}
// per step, per GPU; depth-first. Figures are plain numbers (FLOPs, seconds, FLOP/s; mfu as a
// fraction); null where unknown; precisions largest first. The summary's bwd_flops_per_gpu note
// says "measured: ..." or "estimate: ...". (Other keys of the per-step work are in the code.)
// `modules` holds every row of the text report's tree, in its order (modules[0, model_modules):
// the model, then the roots outside it): containers and modules that never ran included, with
// `ran` false (no range of its own), `container` (modules under it), `figures_from_children`
// (its latency is its children's sum: some ran) and `note` (NoRangeNote) saying which.
void WriteProfileJson(const Profile& profile, JsonWriter& json);

// `--format csv`: the detailed profile, one row per module, header first:
//   path,class,depth,params,params_pct,macs,macs_pct,latency_s,latency_pct,flops,flops_per_s,
//   latency_min_s,latency_max_s,counted_steps,counted_kernels,name,model_path,ran,container,
//   figures_from_children[,flops:<precision>...]
// with one flops:<precision> column per precision the job counted (largest first). The rows are
// the JSON's `modules`, in the same order (the text's tree, containers and modules that never
// ran included); ran, container and figures_from_children are true or false. Empty cells where
// unknown; fields with a comma, quote or newline are quoted (RFC 4180).
std::string RenderProfileCsv(const Profile& profile);

}  // namespace flopscope::client
