#pragma once

#include <cstdint>
#include <map>

namespace flopscope::daemon {

// A rank file's figures over all its sessions: what RankStore keeps and the catalog lists.
struct RankTotals {
  uint64_t sessions = 0;
  uint64_t range_events = 0;
  uint64_t kernels = 0;
  std::map<int, uint64_t> losses;  // LossCause -> sum over sessions of their cumulative count
};

}  // namespace flopscope::daemon
