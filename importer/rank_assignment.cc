#include "importer/rank_assignment.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace flopscope::importer {

absl::StatusOr<std::vector<RankChoice>> AssignRanks(
    const std::vector<std::string>& files, const std::vector<std::optional<int32_t>>& recorded,
    std::optional<int> flag) {
  std::vector<RankChoice> ranks(files.size());
  if (flag.has_value()) {
    if (*flag < 0)
      return absl::InvalidArgumentError(absl::StrCat("--rank ", *flag, " is negative"));
    for (size_t i = 0; i < files.size(); ++i) ranks[i].rank = *flag + static_cast<int32_t>(i);
    return ranks;
  }
  absl::flat_hash_map<int32_t, size_t> owner;  // rank -> file index
  for (size_t i = 0; i < files.size(); ++i) {
    if (!recorded[i].has_value()) continue;
    const auto [it, inserted] = owner.emplace(*recorded[i], i);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(files[it->second], " and ", files[i], " both record rank ", *recorded[i],
                       ": import them into different jobs (--job), or give ranks with --rank"));
    }
    ranks[i].rank = *recorded[i];
  }
  int32_t next_free = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (recorded[i].has_value()) continue;
    while (owner.contains(next_free)) ++next_free;
    owner.emplace(next_free, i);
    ranks[i] = {next_free, true};
  }
  return ranks;
}

}  // namespace flopscope::importer
