#pragma once

#include <string>

#include "client/model/open_range_places.h"

namespace flopscope::client {

// `flopscope where JOB`: a line for each rank that is not where the others are ("rank 1 is not
// where the others are: in Net/slowed (forward) for 12.3 s; ranks 0,2 wait in step/backward for
// 12.1 s": the others' module when they share it, else their phase, and the least time any of
// them has been there), or what the ranks have in common, then one row per rank: its innermost
// open module, phase and how long they have been open, grouped by exact place (largest group
// first), then the ranks no longer running.
std::string RenderWhereText(const std::string& job_id, const WhereAnswer& answer);

// `flopscope where JOB --format json`:
//   {"job": "<id>", "ranks": [{"rank": n, "state": "open" | "nothing_open" | "ended" | "gone" |
//      "no_snapshot" | "unreadable", "module": "<path>" | null, "phase": "<name>" | null,
//      "phase_path": "<path>" | null, "open_for_s": x, "oldest_open_s": x,
//      "snapshot_age_s": x, "thread_id": n, "group": n | null, "flagged": bool,
//      "problem": "<why>" (unreadable only)}],
//    "groups": [{"module": ..., "phase": ..., "phase_path": ..., "nothing_open": bool,
//      "ranks": [n], "open_for_s": x}],
//    "flagged": [n],
//    "majority": null | {"ranks": [n], "module": ..., "phase": ..., "phase_path": ...,
//      "nothing_open": bool, "open_for_s": x}}   (where the others are, when a rank is flagged)
std::string RenderWhereJson(const std::string& job_id, const WhereAnswer& answer);

// "running", "ended", ... as the JSON's "state" says it.
const char* RankStateName(RankState state);

}  // namespace flopscope::client
