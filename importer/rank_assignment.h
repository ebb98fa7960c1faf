#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flopscope::importer {

// The rank each file of one import becomes (every file is one rank):
//   --rank R given: file i is rank R + i, whatever the traces say;
//   otherwise the rank the trace records (Kineto distributedInfo), and files that record none
//   take the lowest ranks no other file claims, in command-line order.
// INVALID_ARGUMENT, naming both files, when two files end up on one rank.
struct RankChoice {
  int32_t rank = 0;
  bool assumed = false;  // neither the trace nor --rank said
};

absl::StatusOr<std::vector<RankChoice>> AssignRanks(
    const std::vector<std::string>& files, const std::vector<std::optional<int32_t>>& recorded,
    std::optional<int> flag);

}  // namespace flopscope::importer
