#include "client/documents/report_json.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "client/text/loss_cause_names.h"
#include "client/text/rejected_batches.h"
#include "common/json/json_writer.h"

namespace flopscope::client {
namespace {

using flopscope::v1::LossCounter;
using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::RankInfo;

// `key`: `value` when the field is set (`has`), else null.
void NumberOrNull(JsonWriter& json, const char* key, bool has, double value) {
  json.Key(key);
  if (has) {
    json.Double(value);
  } else {
    json.Null();
  }
}

// A JSON object cannot repeat a key, so counters naming the same cause twice are added up (in the
// order causes first appear).
void WriteLosses(const google::protobuf::RepeatedPtrField<LossCounter>& losses, JsonWriter& json) {
  std::vector<std::pair<std::string, uint64_t>> merged;
  for (const LossCounter& loss : losses) {
    if (CountsSessions(loss.cause())) continue;  // sessions, not records: a key of its own
    const std::string name = LossCauseName(loss.cause());
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == merged.end()) {
      merged.emplace_back(name, loss.records());
    } else {
      it->second += loss.records();
    }
  }
  json.BeginObject();
  for (const auto& [name, records] : merged) json.Key(name).Uint(records);
  json.EndObject();
}

// Batches the daemon refused (counted by the daemon, beside the producer's own losses):
// {"batches": B, "records": R, "rules": {"<rule>": {"batches": b, "records": r}, ...}}.
void WriteRejected(const RejectedBatches& rejected, JsonWriter& json) {
  json.BeginObject();
  json.Key("batches").Uint(rejected.total.batches);
  json.Key("records").Uint(rejected.total.records);
  json.Key("rules").BeginObject();
  for (const auto& [rule, counts] : rejected.by_rule) {
    json.Key(rule).BeginObject();
    json.Key("batches").Uint(counts.batches).Key("records").Uint(counts.records);
    json.EndObject();
  }
  json.EndObject();
  json.EndObject();
}

// Durations are seconds everywhere in the JSON (schema 3); the daemon keeps integer nanoseconds.
double Seconds(int64_t nanoseconds) { return static_cast<double>(nanoseconds) / 1e9; }

void WriteRank(const RankInfo& rank, JsonWriter& json) {
  json.BeginObject();
  json.Key("rank").Int(rank.rank());
  json.Key("host").String(rank.host());
  json.Key("pid").Int(rank.pid());
  json.Key("gpu_status").String(rank.gpu_status());
  json.Key("devices").BeginArray();
  for (const auto& device : rank.devices()) {
    json.BeginObject();
    json.Key("index").Uint(device.index());
    json.Key("name").String(device.name());
    json.Key("chip").String(device.chip());
    json.Key("sm_count").Uint(device.sm_count());
    json.Key("sm_clock_khz").Uint(device.sm_clock_khz());
    json.Key("memory_bytes").Uint(device.memory_bytes());
    json.Key("compute_capability").Uint(device.compute_capability());
    json.Key("uuid").String(device.uuid());
    json.EndObject();
  }
  json.EndArray();
  json.Key("losses");
  WriteLosses(rank.losses(), json);
  json.Key("sessions_without_final").Uint(SessionsWithoutFinal(rank.losses()));
  json.Key("spooled").Uint(rank.spooled_records());
  json.Key("rejected");
  RejectedBatches rejected;
  rejected.Add(rank);
  WriteRejected(rejected, json);
  json.EndObject();
}

void WritePrecisions(
    const google::protobuf::RepeatedPtrField<flopscope::v1::PrecisionFlops>& precisions,
    JsonWriter& json) {
  json.BeginArray();
  for (const flopscope::v1::PrecisionFlops& entry : precisions) {
    json.BeginObject();
    json.Key("precision").String(entry.precision());
    json.Key("flops").Double(entry.flops());
    json.EndObject();
  }
  json.EndArray();
}

void WriteCounterWindow(const flopscope::v1::RankCounterWindow& entry, JsonWriter& json) {
  const flopscope::v1::CounterWindowRecord& window = entry.window();
  json.BeginObject();
  json.Key("rank").Int(entry.rank());
  json.Key("first_step").Int(window.first_step());
  json.Key("last_step").Int(window.last_step());
  json.Key("trigger").String(window.trigger());
  json.Key("metric_set").String(window.metric_set());
  json.Key("chip").String(window.chip());
  json.Key("passes").Uint(window.passes());
  json.Key("kernels_counted").Uint(window.kernels_counted());
  json.Key("ranges_unmatched").Uint(window.ranges_unmatched());
  json.Key("start_ns").Int(window.start_ns());
  json.Key("end_ns").Int(window.end_ns());
  json.Key("status").String(window.status());
  json.EndObject();
}

void WriteModule(const ModuleStats& module, JsonWriter& json) {
  json.BeginObject();
  json.Key("path").String(module.path());
  json.Key("calls").Uint(module.calls());
  json.Key("cpu_time_s").Double(Seconds(module.cpu_time_ns()));
  NumberOrNull(json, "gpu_time_s", module.has_gpu_time_ns(), Seconds(module.gpu_time_ns()));
  json.Key("kernels").Uint(module.kernels());
  NumberOrNull(json, "gpu_span_s", module.has_gpu_span_ns(), Seconds(module.gpu_span_ns()));
  NumberOrNull(json, "gpu_busy_s", module.has_gpu_busy_ns(), Seconds(module.gpu_busy_ns()));
  json.Key("memcpy").BeginObject();
  json.Key("count").Uint(module.memcpy_count());
  json.Key("time_s").Double(Seconds(module.memcpy_time_ns()));
  json.Key("bytes").Uint(module.memcpy_bytes());
  json.EndObject();
  json.Key("memset").BeginObject();
  json.Key("count").Uint(module.memset_count());
  json.Key("time_s").Double(Seconds(module.memset_time_ns()));
  json.Key("bytes").Uint(module.memset_bytes());
  json.EndObject();
  NumberOrNull(json, "flops", module.has_flops(), module.flops());
  json.Key("params");
  if (module.has_params()) {
    json.Uint(module.params());
  } else {
    json.Null();
  }
  NumberOrNull(json, "fwd_flops", module.has_fwd_flops(), module.fwd_flops());
  NumberOrNull(json, "bwd_flops", module.has_bwd_flops(), module.bwd_flops());
  json.Key("flops_by_precision");
  WritePrecisions(module.flops_by_precision(), json);
  json.Key("counted_steps").Uint(module.counted_steps());
  json.Key("counted_kernels").Uint(module.counted_kernels());
  json.EndObject();
}

void WriteKernelSummary(const flopscope::v1::KernelSummary& kernel, JsonWriter& json) {
  json.BeginObject();
  json.Key("name").String(kernel.name());
  json.Key("demangled").String(kernel.demangled());
  json.Key("kind").String(kernel.kind() == flopscope::v1::ACTIVITY_KIND_MEMCPY   ? "memcpy"
                          : kernel.kind() == flopscope::v1::ACTIVITY_KIND_MEMSET ? "memset"
                                                                                 : "kernel");
  json.Key("count").Uint(kernel.count());
  json.Key("total_s").Double(Seconds(kernel.total_ns()));
  json.Key("min_s").Double(Seconds(kernel.min_ns()));
  json.Key("max_s").Double(Seconds(kernel.max_ns()));
  json.Key("bytes").Uint(kernel.bytes());
  json.EndObject();
}

void WritePhase(const PhaseStats& phase, JsonWriter& json) {
  json.BeginObject();
  json.Key("name").String(phase.name());
  json.Key("calls").Uint(phase.calls());
  json.Key("cpu_time_s").Double(Seconds(phase.cpu_time_ns()));
  json.Key("min_s").Double(Seconds(phase.min_ns()));
  json.Key("max_s").Double(Seconds(phase.max_ns()));
  json.Key("median_s").Double(Seconds(phase.median_ns()));
  NumberOrNull(json, "flops", phase.has_flops(), phase.flops());
  json.Key("flops_by_precision");
  WritePrecisions(phase.flops_by_precision(), json);
  json.EndObject();
}

}  // namespace

std::string RenderReportJson(const flopscope::v1::Report& report) {
  return RenderReportJson(report, [](JsonWriter&) {});
}

std::string RenderReportJson(const flopscope::v1::Report& report,
                             const std::function<void(JsonWriter&)>& extend) {
  JsonWriter json;
  json.BeginObject();
  json.Key("schema_version").Int(kReportSchemaVersion);
  json.Key("job").String(report.job_id());
  json.Key("ranks").BeginArray();
  for (const RankInfo& rank : report.ranks()) WriteRank(rank, json);
  json.EndArray();
  json.Key("modules").BeginArray();
  for (const ModuleStats& module : report.modules()) WriteModule(module, json);
  json.EndArray();
  json.Key("phases").BeginArray();
  for (const PhaseStats& phase : report.phases()) WritePhase(phase, json);
  json.EndArray();
  json.Key("losses");
  WriteLosses(report.losses(), json);
  json.Key("sessions_without_final").Uint(SessionsWithoutFinal(report.losses()));
  json.Key("spooled").Uint(report.spooled_records());
  json.Key("rejected");
  RejectedBatches rejected;
  for (const RankInfo& rank : report.ranks()) rejected.Add(rank);
  WriteRejected(rejected, json);
  json.Key("counter_windows").BeginArray();
  for (const auto& window : report.counter_windows()) WriteCounterWindow(window, json);
  json.EndArray();
  json.Key("fp16_convention").String(report.fp16_convention());
  if (!report.top_kernels_of().empty()) {
    json.Key("top_kernels_of").String(report.top_kernels_of());
    json.Key("top_kernels").BeginArray();
    for (const flopscope::v1::KernelSummary& kernel : report.top_kernels()) {
      WriteKernelSummary(kernel, json);
    }
    json.EndArray();
  }
  extend(json);
  json.EndObject();
  return json.Finish();
}

}  // namespace flopscope::client
