#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// Where things live under the data directory (DESIGN: Storage):
//   <data_dir>/catalog.sqlite
//   <data_dir>/jobs/<job>/rank-<NNNNN>.sqlite   (rank zero-padded to 5 digits)
//   <data_dir>/jobs/<job>/rank-<NNNNN>.alt.sqlite   (beside a usual file the daemon left alone:
//                                                    left_alone_files.h)
// Job ids must have passed common/job_id.h's JobIdProblem before they get here.
std::string CatalogPath(absl::string_view data_dir);
std::string JobDirectory(absl::string_view data_dir, absl::string_view job_id);
std::string RankFilePath(absl::string_view data_dir, absl::string_view job_id, int32_t rank);
std::string AlternateRankFilePath(absl::string_view data_dir, absl::string_view job_id,
                                  int32_t rank);

// Creates `dir` and its parents when missing (mode 0750: the data of other users' jobs).
absl::Status EnsureDirectory(const std::string& dir);

}  // namespace flopscope::daemon
