#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// Batches the daemon refused (daemon/validate/batch_validator.h), summed over some ranks: the
// daemon counts them where it drops them, since the producer cannot. Shown beside the producer's
// own losses by `flopscope report` (text and JSON).
struct RejectedBatches {
  struct Counts {
    uint64_t batches = 0;
    uint64_t records = 0;
  };
  Counts total;
  std::map<std::string, Counts> by_rule;  // in rule order

  void Add(const flopscope::v1::RankInfo& rank);
};

}  // namespace flopscope::client
