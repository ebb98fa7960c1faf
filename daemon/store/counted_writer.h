#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "common/sqlite/sqlite_statement.h"
#include "daemon/store/counted_rollup.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// The counter part of one validated batch (BatchWriter calls it inside the same transaction):
// kernel_flops and counter_windows rows, and the rollups kept current from them (module_stats'
// flops and counted_kernels, module_flops, phase_flops, counted_steps; schema/rank.sql).
//
// Not thread-safe: RankStore calls it under its mutex, through BatchWriter.
class CountedWriter {
 public:
  static absl::StatusOr<std::unique_ptr<CountedWriter>> Prepare(SqliteDb& db);

  absl::Status Write(int64_t sid, const v1::Batch& batch);

 private:
  CountedWriter() = default;
  absl::Status WriteKernelFlops(int64_t sid, const v1::KernelFlops& counted);
  absl::Status WriteWindow(int64_t sid, const v1::CounterWindowRecord& window);
  absl::Status WriteRollups(int64_t sid, const v1::Batch& batch);
  absl::Status WritePrecisions(
      int64_t sid, SqliteStatement& upsert,
      const absl::flat_hash_map<CountedRollup::PathPrecision, PrecisionTotals>& totals);

  std::unique_ptr<SqliteStatement> insert_kernel_flops_;
  std::unique_ptr<SqliteStatement> insert_window_;
  std::unique_ptr<SqliteStatement> upsert_module_counted_;
  std::unique_ptr<SqliteStatement> upsert_module_flops_;
  std::unique_ptr<SqliteStatement> upsert_phase_flops_;
  std::unique_ptr<SqliteStatement> insert_step_;
  CountedRollup rollup_;
};

}  // namespace flopscope::daemon
