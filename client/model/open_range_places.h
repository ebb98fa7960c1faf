#pragma once

// `flopscope where` (issue 31): where each rank of a job is now, from its latest snapshot of open
// ranges (Query.GetOpenRanges), the ranks grouped by place, and the ranks that are not where the
// others are. No text, no I/O.
//
// A rank's place is one thread's: the thread whose outermost open range is the oldest (the
// training loop holds the step open; a helper thread's ranges come and go), and in it the
// innermost open module range with the innermost open step or phase. Ranks blocked in a
// collective that opens no range of its own (gloo, NCCL under DDP's hooks) are where that
// collective was called from, and ranks waiting at one collective may still differ in which
// module range their hooks left open (DDP's all-reduce waits at the end of the backward, before
// or after the first layer's backward range closes). So the ranks out of place are found on the
// coarsest level that tells them apart: by step or phase first (a rank in `forward` while the
// others are in `backward`), and only when every running rank is in the same phase, by module
// (a rank in `layers.11/mlp` while the others wait in `layers.11/attn`). The table groups ranks by
// their exact place (module and phase); a running rank with nothing open is a place too.

#include <cstdint>
#include <string>
#include <vector>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

enum class RankState {
  kOpen,         // running, with ranges open
  kNothingOpen,  // running, nothing open (between steps, or outside instrumented code)
  kEnded,        // no longer running; its last snapshot says nothing was open (a clean exit)
  kGone,         // no longer running, with ranges still open in its last snapshot (killed)
  kNoSnapshot,   // never sent a snapshot (an injector older than `where`, or no range yet)
  kUnreadable,   // the daemon could not read its file (problem)
};

struct RankPlace {
  int32_t rank = 0;
  RankState state = RankState::kNoSnapshot;
  std::string module;      // innermost open module range's path; "" when none
  std::string phase_path;  // innermost open step or phase ("step/forward"); "" when none
  std::string phase;       // its last component ("forward")
  // How long the innermost open range (the module, else the phase) has been open, and the
  // oldest open range of the rank, in seconds at the daemon's answer.
  double age_s = 0;
  double phase_age_s = 0;  // the innermost step or phase alone
  double oldest_age_s = 0;
  double snapshot_age_s = 0;  // how old the snapshot is (it is resent only when it changes)
  uint64_t thread_id = 0;     // the thread the place is taken from
  int group = -1;             // index into WhereAnswer::groups; -1: not grouped (not running)
  bool flagged = false;       // not where the others are
  std::string problem;        // kUnreadable: why
};

// Running ranks at one place.
struct PlaceGroup {
  std::string module;
  std::string phase_path;
  std::string phase;
  bool nothing_open = false;
  std::vector<int32_t> ranks;  // in rank order
  double min_age_s = 0;        // of their innermost open ranges
  double max_age_s = 0;
};

// Where the majority of the running ranks is, on the level that sets the others apart.
struct Majority {
  std::vector<int32_t> ranks;  // in rank order
  std::string module;          // "" when they differ in modules (the phase sets them apart)
  std::string phase_path;
  std::string phase;
  bool nothing_open = false;
  double age_s = 0;  // the least time any of them has been there (module, else phase)
};

struct WhereAnswer {
  std::vector<RankPlace> ranks;    // in rank order
  std::vector<PlaceGroup> groups;  // exact places, largest first (ties: the lowest rank first)
  // Running ranks outside the majority, when a group larger than every other exists on the
  // phase level, else (every running rank in one phase) on the module level; with two groups of
  // the same size nobody can say who is out of place, and nobody is flagged.
  std::vector<int32_t> flagged;
  Majority majority;  // meaningful when `flagged` is not empty
};

WhereAnswer PlaceRanks(const flopscope::v1::OpenRangesResponse& response);

// "step/forward" -> "forward".
std::string LastComponent(const std::string& path);

}  // namespace flopscope::client
