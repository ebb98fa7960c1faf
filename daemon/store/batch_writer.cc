#include "daemon/store/batch_writer.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

constexpr int kKernelColumns = 21;
// Rows per multi-row kernel INSERT: fewer sqlite3_step calls per row, well under SQLite's limit
// of 32766 parameters per statement.
constexpr int kKernelRowsPerInsert = 32;

std::string KernelInsertSql(int rows) {
  std::string sql =
      "INSERT INTO kernels(sid, correlation_id, path_id, range_instance_id, name_id, device_id, "
      "context_id, stream_id, start_ns, end_ns, grid_x, grid_y, grid_z, block_x, block_y, "
      "block_z, kind, bytes, graph_id, graph_node_id, counted) VALUES ";
  for (int row = 0; row < rows; ++row) {
    absl::StrAppend(&sql, row == 0 ? "" : ",", "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  }
  return sql;
}

// Binds one kernel row at parameters first..first+20, in the column order of KernelInsertSql.
void BindKernel(SqliteStatement& stmt, int first, int64_t sid, const v1::KernelRecord& k) {
  stmt.BindInt(first, sid);
  stmt.BindUint(first + 1, k.correlation_id());
  stmt.BindUint(first + 2, k.path_id());
  stmt.BindUint(first + 3, k.range_instance_id());
  stmt.BindInt(first + 4, k.name_id());
  stmt.BindInt(first + 5, k.device_id());
  stmt.BindInt(first + 6, k.context_id());
  stmt.BindInt(first + 7, k.stream_id());
  stmt.BindInt(first + 8, k.start_ns());
  stmt.BindInt(first + 9, k.end_ns());
  stmt.BindInt(first + 10, k.grid_x());
  stmt.BindInt(first + 11, k.grid_y());
  stmt.BindInt(first + 12, k.grid_z());
  stmt.BindInt(first + 13, k.block_x());
  stmt.BindInt(first + 14, k.block_y());
  stmt.BindInt(first + 15, k.block_z());
  stmt.BindInt(first + 16, k.kind());
  stmt.BindUint(first + 17, k.bytes());
  stmt.BindUint(first + 18, k.graph_id());
  stmt.BindUint(first + 19, k.graph_node_id());
  stmt.BindInt(first + 20, k.counted() ? 1 : 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchWriter>> BatchWriter::Prepare(SqliteDb& db) {
  std::unique_ptr<BatchWriter> writer(new BatchWriter());
  // Built first: PrepareAll takes the SQL as C strings, which these must outlive.
  const std::string insert_kernel_sql = KernelInsertSql(1);
  const std::string insert_kernel_many_sql = KernelInsertSql(kKernelRowsPerInsert);
  const absl::Status prepared = db.PrepareAll({
      {&writer->insert_string_, "INSERT OR IGNORE INTO strings(sid, id, value) VALUES(?,?,?)"},
      {&writer->insert_path_,
       "INSERT OR IGNORE INTO range_paths(sid, id, parent_id, domain, name) VALUES(?,?,?,?,?)"},
      {&writer->insert_range_,
       "INSERT INTO range_events(sid, path_id, instance_id, parent_instance_id, thread_id, "
       "start_ns, end_ns, kind, counted) VALUES(?,?,?,?,?,?,?,?,?)"},
      {&writer->insert_kernel_, insert_kernel_sql.c_str()},
      {&writer->insert_kernel_many_, insert_kernel_many_sql.c_str()},
      {&writer->insert_metadata_, "INSERT INTO metadata(sid, time_ns, key, value) VALUES(?,?,?,?)"},
      // Loss counts are cumulative per session: keep the largest seen, so resends never add up.
      {&writer->upsert_loss_,
       "INSERT INTO losses(sid, cause, records) VALUES(?,?,?) ON CONFLICT(sid, cause) DO UPDATE "
       "SET records = MAX(records, excluded.records)"},
      // SQLite's scalar MIN/MAX return NULL when an argument is NULL, hence the COALESCEs. The
      // flops and counted_kernels columns are CountedWriter's.
      {&writer->upsert_module_stats_,
       "INSERT INTO module_stats(sid, path_id, calls, cpu_time_ns, min_ns, max_ns, kernels, "
       "gpu_time_ns) VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(sid, path_id) DO UPDATE SET "
       "calls = calls + excluded.calls, cpu_time_ns = cpu_time_ns + excluded.cpu_time_ns, "
       "min_ns = COALESCE(MIN(min_ns, excluded.min_ns), min_ns, excluded.min_ns), "
       "max_ns = COALESCE(MAX(max_ns, excluded.max_ns), max_ns, excluded.max_ns), "
       "kernels = kernels + excluded.kernels, gpu_time_ns = gpu_time_ns + excluded.gpu_time_ns"},
      {&writer->upsert_memory_stats_,
       "INSERT INTO memory_stats(sid, path_id, kind, count, time_ns, bytes) VALUES(?,?,?,?,?,?) "
       "ON CONFLICT(sid, path_id, kind) DO UPDATE SET count = count + excluded.count, "
       "time_ns = time_ns + excluded.time_ns, bytes = bytes + excluded.bytes"},
      // Every SET expression reads the row as it was. The busy time of the new kernels that
      // falls before the stored last end is assumed already counted (batches arrive in time
      // order, so this is the overlap at the seam between two batches).
      {&writer->upsert_instance_stats_,
       "INSERT INTO instance_stats(sid, instance_id, path_id, kernels, first_start_ns, "
       "last_end_ns, busy_ns) VALUES(?,?,?,?,?,?,?) ON CONFLICT(sid, instance_id) DO UPDATE SET "
       "kernels = kernels + excluded.kernels, "
       "busy_ns = busy_ns + MAX(0, excluded.busy_ns - MAX(0, MIN(last_end_ns, "
       "excluded.last_end_ns) - excluded.first_start_ns)), "
       "first_start_ns = MIN(first_start_ns, excluded.first_start_ns), "
       "last_end_ns = MAX(last_end_ns, excluded.last_end_ns)"},
      {&writer->update_session_,
       "UPDATE sessions SET last_seq = ?, last_seen_ns = ?, range_events = range_events + ?, "
       "kernels = kernels + ?, final = MAX(final, ?) WHERE sid = ?"},
      // A snapshot older than the stored one (a spool's replay after newer batches) is ignored.
      {&writer->upsert_open_ranges_,
       "INSERT INTO open_ranges(sid, time_ns, snapshot) VALUES(?,?,?) ON CONFLICT(sid) DO "
       "UPDATE SET time_ns = excluded.time_ns, snapshot = excluded.snapshot "
       "WHERE excluded.time_ns >= open_ranges.time_ns"},
  });
  if (!prepared.ok()) return prepared;
  absl::StatusOr<std::unique_ptr<CountedWriter>> counted = CountedWriter::Prepare(db);
  if (!counted.ok()) return counted.status();
  writer->counted_ = *std::move(counted);
  return writer;
}

absl::Status BatchWriter::Write(int64_t sid, const v1::Batch& batch,
                                const SessionDefinitions& known, int64_t now_ns) {
  absl::Status status = WriteStrings(sid, batch, known);
  if (status.ok()) status = WritePaths(sid, batch, known);
  if (status.ok()) status = WriteRanges(sid, batch);
  if (status.ok()) status = WriteKernels(sid, batch);
  if (status.ok()) status = WriteMetadata(sid, batch);
  if (status.ok()) status = WriteLosses(sid, batch);
  if (status.ok()) status = WriteModuleStats(sid, batch);
  if (status.ok()) status = counted_->Write(sid, batch);
  if (status.ok()) status = WriteOpenRanges(sid, batch);
  if (status.ok()) status = UpdateSession(sid, batch, now_ns);
  return status;
}

absl::Status BatchWriter::WriteOpenRanges(int64_t sid, const v1::Batch& batch) {
  if (!batch.has_open_ranges()) return absl::OkStatus();
  std::string bytes;
  if (!batch.open_ranges().SerializeToString(&bytes)) {
    return absl::InternalError("cannot serialize the open ranges");
  }
  upsert_open_ranges_->BindInt(1, sid);
  upsert_open_ranges_->BindInt(2, batch.open_ranges().time_ns());
  upsert_open_ranges_->BindBlob(3, bytes);
  return upsert_open_ranges_->Run();
}

absl::Status BatchWriter::WriteStrings(int64_t sid, const v1::Batch& batch,
                                       const SessionDefinitions& known) {
  for (const v1::StringDef& def : batch.strings()) {
    if (known.FindString(def.id()) != nullptr) continue;  // validated: same value as stored
    insert_string_->BindInt(1, sid);
    insert_string_->BindInt(2, def.id());
    insert_string_->BindText(3, def.value());
    if (absl::Status s = insert_string_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WritePaths(int64_t sid, const v1::Batch& batch,
                                     const SessionDefinitions& known) {
  for (const v1::RangePath& path : batch.paths()) {
    if (known.FindPath(path.id()) != nullptr) continue;  // validated: same content as stored
    insert_path_->BindInt(1, sid);
    insert_path_->BindUint(2, path.id());
    insert_path_->BindUint(3, path.parent_id());
    insert_path_->BindText(4, path.domain());
    insert_path_->BindText(5, path.name());
    if (absl::Status s = insert_path_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WriteRanges(int64_t sid, const v1::Batch& batch) {
  for (const v1::RangeEvent& range : batch.ranges()) {
    insert_range_->BindInt(1, sid);
    insert_range_->BindUint(2, range.path_id());
    insert_range_->BindUint(3, range.instance_id());
    insert_range_->BindUint(4, range.parent_instance_id());
    insert_range_->BindUint(5, range.thread_id());
    insert_range_->BindInt(6, range.start_ns());
    insert_range_->BindInt(7, range.end_ns());
    insert_range_->BindInt(8, range.kind());
    insert_range_->BindInt(9, range.counted() ? 1 : 0);
    if (absl::Status s = insert_range_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WriteKernels(int64_t sid, const v1::Batch& batch) {
  const int count = batch.kernels_size();
  int next = 0;
  for (; count - next >= kKernelRowsPerInsert; next += kKernelRowsPerInsert) {
    for (int row = 0; row < kKernelRowsPerInsert; ++row) {
      BindKernel(*insert_kernel_many_, 1 + row * kKernelColumns, sid, batch.kernels(next + row));
    }
    if (absl::Status s = insert_kernel_many_->Run(); !s.ok()) return s;
  }
  for (; next < count; ++next) {
    BindKernel(*insert_kernel_, 1, sid, batch.kernels(next));
    if (absl::Status s = insert_kernel_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WriteMetadata(int64_t sid, const v1::Batch& batch) {
  for (const v1::Metadata& entry : batch.metadata()) {
    insert_metadata_->BindInt(1, sid);
    insert_metadata_->BindInt(2, entry.time_ns());
    insert_metadata_->BindText(3, entry.key());
    insert_metadata_->BindText(4, entry.value());
    if (absl::Status s = insert_metadata_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WriteLosses(int64_t sid, const v1::Batch& batch) {
  for (const v1::LossCounter& loss : batch.losses()) {
    upsert_loss_->BindInt(1, sid);
    upsert_loss_->BindInt(2, loss.cause());
    upsert_loss_->BindUint(3, loss.records());
    if (absl::Status s = upsert_loss_->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::WriteModuleStats(int64_t sid, const v1::Batch& batch) {
  rollup_.AddBatch(batch);
  for (const auto& [path_id, stats] : rollup_.by_path()) {
    SqliteStatement& stmt = *upsert_module_stats_;
    stmt.BindInt(1, sid);
    stmt.BindUint(2, path_id);
    stmt.BindUint(3, stats.calls);
    stmt.BindInt(4, stats.cpu_time_ns);
    if (stats.calls > 0) {
      stmt.BindInt(5, stats.min_ns);
      stmt.BindInt(6, stats.max_ns);
    } else {
      stmt.BindNull(5);
      stmt.BindNull(6);
    }
    stmt.BindUint(7, stats.kernels);
    stmt.BindInt(8, stats.gpu_time_ns);
    if (absl::Status s = stmt.Run(); !s.ok()) return s;
    if (stats.copies.count > 0) {
      absl::Status s = WriteMemoryStats(sid, path_id, v1::ACTIVITY_KIND_MEMCPY, stats.copies);
      if (!s.ok()) return s;
    }
    if (stats.sets.count > 0) {
      absl::Status s = WriteMemoryStats(sid, path_id, v1::ACTIVITY_KIND_MEMSET, stats.sets);
      if (!s.ok()) return s;
    }
  }
  return WriteInstanceStats(sid);
}

absl::Status BatchWriter::WriteMemoryStats(int64_t sid, uint64_t path_id, v1::ActivityKind kind,
                                           const MemoryTotals& totals) {
  SqliteStatement& stmt = *upsert_memory_stats_;
  stmt.BindInt(1, sid);
  stmt.BindUint(2, path_id);
  stmt.BindInt(3, kind);
  stmt.BindUint(4, totals.count);
  stmt.BindInt(5, totals.time_ns);
  stmt.BindUint(6, totals.bytes);
  return stmt.Run();
}

absl::Status BatchWriter::WriteInstanceStats(int64_t sid) {
  for (const auto& [key, activity] : rollup_.by_occurrence()) {
    SqliteStatement& stmt = *upsert_instance_stats_;
    stmt.BindInt(1, sid);
    stmt.BindUint(2, key);
    stmt.BindUint(3, activity.path_id);
    stmt.BindUint(4, activity.kernels);
    stmt.BindInt(5, activity.first_start_ns);
    stmt.BindInt(6, activity.last_end_ns);
    stmt.BindInt(7, activity.busy_ns);
    if (absl::Status s = stmt.Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchWriter::UpdateSession(int64_t sid, const v1::Batch& batch, int64_t now_ns) {
  update_session_->BindUint(1, batch.seq());
  update_session_->BindInt(2, now_ns);
  update_session_->BindInt(3, batch.ranges_size());
  update_session_->BindUint(4, KernelsOnly(batch));
  update_session_->BindInt(5, batch.final() ? 1 : 0);
  update_session_->BindInt(6, sid);
  return update_session_->Run();
}

}  // namespace flopscope::daemon
