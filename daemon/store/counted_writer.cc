#include "daemon/store/counted_writer.h"

#include <string>

#include "common/json/json_writer.h"

namespace flopscope::daemon {
namespace {

// The tensor FLOPs of one kernel as the JSON object stored in kernel_flops.tensor:
// {"<source>":<flops>,...}, sources in the order received, numbers that read back as the same
// double, so that plain SQL (json_each, json_extract) can read them.
std::string TensorFlopsJson(const v1::FlopCounters& flops) {
  JsonWriter json(/*indent_width=*/0);
  json.BeginObject();
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) {
    json.Key(tensor.source()).Double(tensor.flops());
  }
  json.EndObject();
  std::string text = json.Finish();
  text.pop_back();  // Finish() ends the document with a newline; the column holds the object only
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CountedWriter>> CountedWriter::Prepare(SqliteDb& db) {
  std::unique_ptr<CountedWriter> writer(new CountedWriter());
  absl::Status status = db.PrepareAll({
      {&writer->insert_kernel_flops_,
       "INSERT INTO kernel_flops(sid, correlation_id, fp64, fp32, fp16, tensor, raw, "
       "counted_step, path_id, range_instance_id, name_id, device_id, phase_path_id) "
       "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)"},
      {&writer->insert_window_,
       "INSERT INTO counter_windows(sid, first_step, last_step, trigger, metric_set, chip, "
       "passes, kernels_counted, ranges_unmatched, start_ns, end_ns, status, "
       "comm_kernels_excluded) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)"},
      // A path may have counted FLOPs before (or without) any uncounted record: the row is
      // created with the other figures at their defaults.
      {&writer->upsert_module_counted_,
       "INSERT INTO module_stats(sid, path_id, flops, counted_kernels) VALUES(?,?,?,?) "
       "ON CONFLICT(sid, path_id) DO UPDATE SET flops = COALESCE(flops, 0) + excluded.flops, "
       "counted_kernels = counted_kernels + excluded.counted_kernels"},
      {&writer->upsert_module_flops_,
       "INSERT INTO module_flops(sid, path_id, precision, flops, kernels) VALUES(?,?,?,?,?) "
       "ON CONFLICT(sid, path_id, precision) DO UPDATE SET flops = flops + excluded.flops, "
       "kernels = kernels + excluded.kernels"},
      {&writer->upsert_phase_flops_,
       "INSERT INTO phase_flops(sid, phase_path_id, precision, flops, kernels) "
       "VALUES(?,?,?,?,?) ON CONFLICT(sid, phase_path_id, precision) DO UPDATE SET "
       "flops = flops + excluded.flops, kernels = kernels + excluded.kernels"},
      {&writer->insert_step_, "INSERT OR IGNORE INTO counted_steps(sid, step) VALUES(?,?)"},
  });
  if (!status.ok()) return status;
  return writer;
}

absl::Status CountedWriter::Write(int64_t sid, const v1::Batch& batch) {
  if (batch.kernel_flops().empty() && batch.windows().empty()) return absl::OkStatus();
  for (const v1::KernelFlops& counted : batch.kernel_flops()) {
    if (absl::Status s = WriteKernelFlops(sid, counted); !s.ok()) return s;
  }
  for (const v1::CounterWindowRecord& window : batch.windows()) {
    if (absl::Status s = WriteWindow(sid, window); !s.ok()) return s;
  }
  return WriteRollups(sid, batch);
}

absl::Status CountedWriter::WriteKernelFlops(int64_t sid, const v1::KernelFlops& counted) {
  const v1::FlopCounters& flops = counted.flops();
  // Only kernels profiled in counter windows get here; these strings are not on the hot path.
  const std::string tensor_json = TensorFlopsJson(flops);
  const std::string raw = flops.SerializeAsString();
  SqliteStatement& stmt = *insert_kernel_flops_;
  stmt.BindInt(1, sid);
  stmt.BindUint(2, counted.correlation_id());
  stmt.BindDouble(3, flops.fp64());
  stmt.BindDouble(4, flops.fp32());
  stmt.BindDouble(5, flops.fp16());
  stmt.BindText(6, tensor_json);
  stmt.BindBlob(7, raw);
  stmt.BindInt(8, counted.counted_step());
  stmt.BindUint(9, counted.path_id());
  stmt.BindUint(10, counted.range_instance_id());
  stmt.BindInt(11, counted.name_id());
  stmt.BindInt(12, counted.device_id());
  stmt.BindUint(13, counted.phase_path_id());
  return stmt.Run();
}

absl::Status CountedWriter::WriteWindow(int64_t sid, const v1::CounterWindowRecord& window) {
  SqliteStatement& stmt = *insert_window_;
  stmt.BindInt(1, sid);
  stmt.BindInt(2, window.first_step());
  stmt.BindInt(3, window.last_step());
  stmt.BindText(4, window.trigger());
  stmt.BindText(5, window.metric_set());
  stmt.BindText(6, window.chip());
  stmt.BindInt(7, window.passes());
  stmt.BindUint(8, window.kernels_counted());
  stmt.BindUint(9, window.ranges_unmatched());
  stmt.BindInt(10, window.start_ns());
  stmt.BindInt(11, window.end_ns());
  stmt.BindText(12, window.status());
  stmt.BindUint(13, window.comm_kernels_excluded());
  return stmt.Run();
}

absl::Status CountedWriter::WriteRollups(int64_t sid, const v1::Batch& batch) {
  rollup_.AddBatch(batch);
  for (const auto& [path_id, totals] : rollup_.by_path()) {
    SqliteStatement& stmt = *upsert_module_counted_;
    stmt.BindInt(1, sid);
    stmt.BindUint(2, path_id);
    stmt.BindDouble(3, totals.flops);
    stmt.BindUint(4, totals.kernels);
    if (absl::Status s = stmt.Run(); !s.ok()) return s;
  }
  absl::Status status = WritePrecisions(sid, *upsert_module_flops_, rollup_.module_precisions());
  if (status.ok()) status = WritePrecisions(sid, *upsert_phase_flops_, rollup_.phase_precisions());
  for (int64_t step : rollup_.steps()) {
    if (!status.ok()) break;
    insert_step_->BindInt(1, sid);
    insert_step_->BindInt(2, step);
    status = insert_step_->Run();
  }
  return status;
}

absl::Status CountedWriter::WritePrecisions(
    int64_t sid, SqliteStatement& upsert,
    const absl::flat_hash_map<CountedRollup::PathPrecision, PrecisionTotals>& totals) {
  for (const auto& [key, precision] : totals) {
    upsert.BindInt(1, sid);
    upsert.BindUint(2, key.first);
    upsert.BindText(3, key.second);
    upsert.BindDouble(4, precision.flops);
    upsert.BindUint(5, precision.kernels);
    if (absl::Status s = upsert.Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
