#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "common/sqlite/sqlite_statement.h"
#include "daemon/store/batch_rollup.h"
#include "daemon/store/counted_writer.h"
#include "daemon/validate/session_definitions.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// The batch's kernels, memory copies and sets left out: every view counts kernels alone
// (issue 14, item 7). An activity of no stated kind is a kernel, as older injectors send them.
inline uint64_t KernelsOnly(const v1::Batch& batch) {
  uint64_t kernels = 0;
  for (const auto& activity : batch.kernels()) {
    if (activity.kind() != v1::ACTIVITY_KIND_MEMCPY &&
        activity.kind() != v1::ACTIVITY_KIND_MEMSET) {
      ++kernels;
    }
  }
  return kernels;
}

// Writes the rows of one validated batch into a rank database, inside a transaction its caller
// (RankStore) opened: records, the module_stats / memory_stats / instance_stats rollups (counted
// records stored but left out of them), counted FLOPs and windows (CountedWriter), losses and the
// session's progress. All
// statements are prepared once, integers are bound directly and text is bound without copying,
// so the per-row cost is a bind and a step (kernels go in multi-row INSERTs).
//
// Not thread-safe: RankStore calls it under its mutex.
class BatchWriter {
 public:
  static absl::StatusOr<std::unique_ptr<BatchWriter>> Prepare(SqliteDb& db);

  // `known`: definitions committed by earlier batches of the session (not written again).
  absl::Status Write(int64_t sid, const v1::Batch& batch, const SessionDefinitions& known,
                     int64_t now_ns);

 private:
  BatchWriter() = default;
  absl::Status WriteStrings(int64_t sid, const v1::Batch& batch, const SessionDefinitions& known);
  absl::Status WritePaths(int64_t sid, const v1::Batch& batch, const SessionDefinitions& known);
  absl::Status WriteRanges(int64_t sid, const v1::Batch& batch);
  absl::Status WriteKernels(int64_t sid, const v1::Batch& batch);
  absl::Status WriteMetadata(int64_t sid, const v1::Batch& batch);
  absl::Status WriteLosses(int64_t sid, const v1::Batch& batch);
  absl::Status WriteModuleStats(int64_t sid, const v1::Batch& batch);
  absl::Status WriteMemoryStats(int64_t sid, uint64_t path_id, v1::ActivityKind kind,
                                const MemoryTotals& totals);
  absl::Status WriteInstanceStats(int64_t sid);
  absl::Status UpdateSession(int64_t sid, const v1::Batch& batch, int64_t now_ns);
  absl::Status WriteOpenRanges(int64_t sid, const v1::Batch& batch);

  std::unique_ptr<SqliteStatement> insert_string_;
  std::unique_ptr<SqliteStatement> insert_path_;
  std::unique_ptr<SqliteStatement> insert_range_;
  std::unique_ptr<SqliteStatement> insert_kernel_;       // one row
  std::unique_ptr<SqliteStatement> insert_kernel_many_;  // kKernelRowsPerInsert rows
  std::unique_ptr<SqliteStatement> insert_metadata_;
  std::unique_ptr<SqliteStatement> upsert_loss_;
  std::unique_ptr<SqliteStatement> upsert_module_stats_;
  std::unique_ptr<SqliteStatement> upsert_memory_stats_;
  std::unique_ptr<SqliteStatement> upsert_instance_stats_;
  std::unique_ptr<SqliteStatement> update_session_;
  std::unique_ptr<SqliteStatement> upsert_open_ranges_;
  std::unique_ptr<CountedWriter> counted_;
  BatchRollup rollup_;
};

}  // namespace flopscope::daemon
