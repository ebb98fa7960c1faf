#include "daemon/validate/parallel_mark.h"

#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace flopscope::daemon {
namespace {

// Layouts beyond this are typos, not clusters.
constexpr uint32_t kMaxParallelSize = 1u << 20;

absl::Status CheckCoordinate(absl::string_view name, uint32_t index, uint32_t size) {
  if (index < size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("parallel mark: ", name, "_rank=", index, " is outside ", name, "=", size));
}

}  // namespace

absl::StatusOr<v1::ParallelLayout> ParseParallelMark(absl::string_view value) {
  uint32_t tp = 1, pp = 1, dp = 1, tp_rank = 0, pp_rank = 0, dp_rank = 0;
  const std::vector<std::pair<absl::string_view, uint32_t*>> fields = {
      {"tp", &tp},           {"pp", &pp},           {"dp", &dp},
      {"tp_rank", &tp_rank}, {"pp_rank", &pp_rank}, {"dp_rank", &dp_rank}};
  for (absl::string_view pair : absl::StrSplit(value, ' ', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, '=');
    for (const auto& [name, slot] : fields) {
      if (kv.first != name) continue;
      if (!absl::SimpleAtoi(kv.second, slot) || *slot > kMaxParallelSize) {
        return absl::InvalidArgumentError(
            absl::StrCat("parallel mark: '", pair, "' is not ", name, "=<count>"));
      }
    }
  }
  if (tp == 0 || pp == 0 || dp == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel mark: sizes must be at least 1 (got '", value, "')"));
  }
  for (absl::Status status :
       {CheckCoordinate("tp", tp_rank, tp), CheckCoordinate("pp", pp_rank, pp),
        CheckCoordinate("dp", dp_rank, dp)}) {
    if (!status.ok()) return status;
  }
  v1::ParallelLayout layout;
  layout.set_tp_size(tp);
  layout.set_pp_size(pp);
  layout.set_dp_size(dp);
  layout.set_tp_rank(tp_rank);
  layout.set_pp_rank(pp_rank);
  layout.set_dp_rank(dp_rank);
  layout.set_source("nvtx");
  return layout;
}

}  // namespace flopscope::daemon
