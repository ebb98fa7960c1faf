#pragma once

#include <string>
#include <vector>

#include "client/model/profile_model.h"

namespace flopscope::client {

// The parallel-group rollups of DESIGN "Rollups", over per-rank profiles (each built from the
// daemon's report of one rank).

// One model replica (its tp x pp ranks): params, MACs and FLOPs summed per module and for the
// model; latencies (per module and fwd/bwd/step/iter) the max over the ranks, since the replica
// waits for its slowest shard; per-GPU figures are the mean over the ranks. Modules of different
// pipeline stages are merged into one tree (a module new to the tree goes after its parent's
// last descendant). `scope` names the group in the report.
Profile CombineModelReplica(const std::vector<Profile>& ranks, const ProfileOptions& options,
                            const std::string& scope);

// A module's latency across the data-parallel replicas (each a CombineModelReplica profile).
struct ModuleSpread {
  std::string path;
  uint32_t depth = 0;
  int replicas = 0;  // how many replicas ran the module
  double mean_s = 0;
  double min_s = 0;
  double max_s = 0;
  double spread_s = 0;    // max - min
  double spread_pct = 0;  // (max - min) / mean, in percent; 0 when the mean is 0
  int slowest = -1;       // index into the replicas given
};

// Per module, in tree order; plus a first row "<iter>" for the iteration latency when known.
std::vector<ModuleSpread> DataParallelSpread(const std::vector<Profile>& replicas);

}  // namespace flopscope::client
