#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/report/rank_snapshot.h"
#include "daemon/store/range_fold_codec.h"

namespace flopscope::daemon {

struct RangeRows;  // range_row_cache.h

// Reads a rank file for a report on a connection of its own, inside one read transaction: a
// consistent snapshot that never waits for (nor blocks) the stream writing the file (WAL).
// Works on files of jobs long gone, which no RankStore has open.
struct RankReadOptions {
  // Also group the raw kernels table by (path, kind, name): a scan of every kernel, done only
  // for `flopscope report --kernels`.
  bool kernel_groups = false;
  // Per-step module figures for these steps (`flopscope report --steps A:B`); without a window
  // only the steps and phases get per-step figures (RankSnapshot::step_figures).
  std::optional<StepWindowRequest> step_window;
};

class RankReader {
 public:
  static absl::StatusOr<RankSnapshot> Read(const std::string& path,
                                           const RankReadOptions& options = {});
  // The same in two halves, so that a connection can serve many reports (ReaderPool): Open
  // checks the file's schema (upgrading an older one), Read reads one snapshot from it.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  static absl::StatusOr<RankSnapshot> Read(SqliteDb& db, const RankReadOptions& options = {});
  // The same, with the file's range events kept in `cached` between reads (range_row_cache.h):
  // only the raw rows committed since its last read come from SQLite. `cached` must be this
  // file's (or empty), and no other thread may use it meanwhile.
  static absl::StatusOr<RankSnapshot> Read(SqliteDb& db, const RankReadOptions& options,
                                           RangeRows* cached);
};

// Calls `on_event` for each folded range event of the file (range_folds, step_folding.h), oldest
// fold first: in commit order they precede every raw event.
absl::Status ForEachFoldedRange(SqliteDb& db,
                                const std::function<void(const FoldedRange&)>& on_event);

}  // namespace flopscope::daemon
