#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/rank_snapshot.h"

namespace flopscope::daemon {

// Reads a rank file for a report on a connection of its own, inside one read transaction: a
// consistent snapshot that never waits for (nor blocks) the stream writing the file (WAL).
// Works on files of jobs long gone, which no RankStore has open.
struct RankReadOptions {
  // Also group the raw kernels table by (path, kind, name): a scan of every kernel, done only
  // for `flopscope report --kernels`.
  bool kernel_groups = false;
};

class RankReader {
 public:
  static absl::StatusOr<RankSnapshot> Read(const std::string& path,
                                           const RankReadOptions& options = {});
};

}  // namespace flopscope::daemon
