#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/batch_rollup.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// What a report needs from one rank file (small tables only: never the raw kernels).
struct RankSnapshot {
  struct Path {
    int64_t sid = 0;
    uint64_t id = 0;
    uint64_t parent_id = 0;
    std::string domain;
    std::string name;
  };
  struct PathStats {
    int64_t sid = 0;
    uint64_t path_id = 0;  // 0: kernels launched with no range open
    SelfStats stats;
  };

  std::vector<Path> paths;       // by session, then id (ids are handed out in first-seen order)
  std::vector<PathStats> stats;  // module_stats rows
  std::vector<v1::Metadata> metadata;  // by session, then arrival
  std::map<int, uint64_t> losses;      // cause -> summed over sessions
};

}  // namespace flopscope::daemon
