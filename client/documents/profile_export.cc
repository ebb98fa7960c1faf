#include "client/documents/profile_export.h"

#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/text/memory_view.h"

namespace flopscope::client {
namespace {

void OptionalDouble(std::optional<double> value, JsonWriter& json) {
  if (value) {
    json.Double(*value);
  } else {
    json.Null();
  }
}

std::vector<std::pair<const char*, const Figure*>> SummaryFigures(const Profile& profile) {
  return {{"params_per_gpu", &profile.params_per_gpu},
          {"params_of_model", &profile.params_of_model},
          {"fwd_macs_per_gpu", &profile.fwd_macs_per_gpu},
          {"fwd_flops_per_gpu", &profile.fwd_flops_per_gpu},
          {"fwd_flops_of_model", &profile.fwd_flops_of_model},
          {"bwd_flops_per_gpu", &profile.bwd_flops_per_gpu},
          {"fwd_latency_s", &profile.fwd_latency_s},
          {"bwd_latency_s", &profile.bwd_latency_s},
          {"step_latency_s", &profile.step_latency_s},
          {"iter_latency_s", &profile.iter_latency_s},
          {"fwd_flops_per_s", &profile.fwd_flops_per_s},
          {"bwd_flops_per_s", &profile.bwd_flops_per_s},
          {"fwd_bwd_flops_per_s", &profile.fwd_bwd_flops_per_s},
          {"samples_per_s", &profile.samples_per_s},
          {"mfu", &profile.mfu},
          {"fwd_bwd_step_flops_per_s", &profile.fwd_bwd_step_flops_per_s},
          {"measured_step_range_s", &profile.measured_step_range_s}};
}

void WritePrecisions(const std::vector<PrecisionFlops>& precisions, JsonWriter& json) {
  json.BeginArray();
  for (const PrecisionFlops& entry : precisions) {
    json.BeginObject();
    json.Key("precision").String(entry.precision);
    json.Key("flops").Double(entry.flops);
    json.EndObject();
  }
  json.EndArray();
}

void WriteCountedSummary(const Profile& profile, JsonWriter& json) {
  json.Key("counted_ranks").Int(profile.counted_ranks);
  json.Key("flops_by_precision");
  WritePrecisions(profile.flops_by_precision, json);
  json.Key("fp16_convention").String(profile.fp16_convention);
  json.Key("counter_windows").BeginArray();
  for (const CountedWindow& window : profile.counter_windows) {
    json.BeginObject();
    json.Key("rank").Int(window.rank);
    json.Key("first_step").Int(window.first_step);
    json.Key("last_step").Int(window.last_step);
    json.Key("metric_set").String(window.metric_set);
    json.Key("passes").Uint(window.passes);
    json.Key("kernels_counted").Uint(window.kernels_counted);
    json.Key("ranges_unmatched").Uint(window.ranges_unmatched);
    json.Key("status").String(window.status);
    json.EndObject();
  }
  json.EndArray();
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

// The shortest text that reads back as the same double: "0.004", not "0.0040000000000000001".
std::string CsvNumber(std::optional<double> value) {
  if (!value) return "";
  // Plain digits for the magnitudes a profile has (no "4e+09"); exponents only at the extremes.
  const double magnitude = std::abs(*value);
  const bool plain = magnitude == 0 || (magnitude >= 1e-6 && magnitude < 1e21);
  char text[128];
  const std::to_chars_result end =
      plain ? std::to_chars(text, text + sizeof(text), *value, std::chars_format::fixed)
            : std::to_chars(text, text + sizeof(text), *value);
  return std::string(text, end.ptr);
}

// The job's precisions, each a CSV column "flops:<precision>" of the modules' FLOPs.
std::string PrecisionCell(const ModuleRow& row, const std::string& precision) {
  for (const PrecisionFlops& entry : row.flops_by_precision) {
    if (entry.precision == precision) return CsvNumber(entry.flops);
  }
  return "";
}

std::optional<double> Share(std::optional<double> part, std::optional<double> total) {
  if (!part || !total || *total <= 0) return std::nullopt;
  return 100 * *part / *total;
}

}  // namespace

namespace {

void WriteStepWindow(const StepScope& scope, JsonWriter& json) {
  json.Key("step_window").BeginObject();
  json.Key("requested").Bool(scope.window);
  json.Key("first").Int(scope.first_step);
  json.Key("last").Int(scope.last_step);
  json.Key("uncounted").Uint(scope.uncounted_steps);
  json.Key("counted").BeginArray();
  for (int64_t step : scope.counted_steps) json.Int(step);
  json.EndArray();
  json.EndObject();
}

// Each summary figure as {"value": <number or null>, "note": <why missing or how estimated>}.
void WriteSummary(const Profile& profile, JsonWriter& json) {
  json.Key("summary").BeginObject();
  for (const auto& [name, figure] : SummaryFigures(profile)) {
    json.Key(name).BeginObject();
    json.Key("value");
    OptionalDouble(figure->value, json);
    json.Key("note").String(figure->note);
    json.EndObject();
  }
  json.EndObject();
}

void WriteModuleRow(const ModuleRow& row, JsonWriter& json) {
  const auto optional = [&json](const char* key, std::optional<double> value) {
    json.Key(key);
    OptionalDouble(value, json);
  };
  const auto text_or_null = [&json](const char* key, const std::string& text) {
    json.Key(key);
    if (text.empty()) {
      json.Null();
    } else {
      json.String(text);
    }
  };
  json.BeginObject();
  json.Key("path").String(row.path);
  json.Key("class").String(row.class_name);
  json.Key("depth").Uint(row.depth);
  // The text tree's row: its name there ("(0)" of a ModuleList) and model path, and what it is
  // where it has no range of its own (every module of the tree is here, in model order).
  json.Key("name").String(row.name);
  json.Key("model_path").String(TreePath(row));
  json.Key("ran").Bool(!row.never_ran);
  json.Key("container").Bool(row.container);
  json.Key("figures_from_children").Bool(row.figures_from_children);
  text_or_null("note", NoRangeNote(row));
  optional("params", row.params);
  optional("macs", row.macs);
  optional("flops", row.flops);
  optional("all_passes_flops", row.all_passes_flops);
  optional("bwd_flops", row.bwd_flops);
  json.Key("flops_announced").Bool(row.flops_announced);
  optional("announced_flops", row.announced_flops);
  json.Key("flops_disagree").Bool(row.flops_disagree);
  text_or_null("flops_source", FlopsSourceOf(row));
  optional("estimated_flops", row.estimated_flops);
  json.Key("params_from_children").Bool(row.params_from_children);
  json.Key("extra_repr").String(row.extra_repr);
  text_or_null("deepspeed_differs", row.deepspeed_differs);
  json.Key("latency_s").Double(row.latency_s);
  optional("bwd_latency_s", row.bwd_latency_s);
  json.Key("all_passes_latency_s").Double(row.all_passes_latency_s);
  optional("latency_min_s", row.latency_min_s);
  optional("latency_max_s", row.latency_max_s);
  optional("flops_per_s", row.flops_per_s.value);
  json.Key("flops_per_s_note").String(row.flops_per_s.note);
  json.Key("flops_by_precision");
  WritePrecisions(row.flops_by_precision, json);
  json.Key("counted_steps").Uint(row.counted_steps);
  json.Key("counted_kernels").Uint(row.counted_kernels);
  json.EndObject();
}

}  // namespace

void WriteProfileJson(const Profile& profile, JsonWriter& json) {
  json.Key("profile").BeginObject();
  json.Key("scope").String(profile.scope);
  json.Key("ranks_reported").Int(profile.ranks);
  json.Key("partial");  // "2 of 8 ranks reported", null for the whole job
  if (std::string partial = PartialRanksLine(profile); !partial.empty()) {
    json.String(partial);
  } else {
    json.Null();
  }
  json.Key("merged_sessions");  // a restart or a reused job id; null when every rank ran once
  if (std::string merged = MergedSessionsLine(profile); !merged.empty()) {
    json.String(merged);
  } else {
    json.Null();
  }
  json.Key("world_size").Int(profile.world_size);
  json.Key("dp_size").Int(profile.dp_size);
  json.Key("mp_size").Int(profile.mp_size);
  json.Key("steps").Uint(profile.steps);
  if (profile.micro_batches > 1) {
    // Gradient accumulation: the summary's and the model rows' figures are per micro-batch.
    json.Key("micro_batches_per_step").Uint(profile.micro_batches);
  }
  json.Key("batch_size");
  if (profile.batch_size) {
    json.Int(*profile.batch_size);
  } else {
    json.Null();
  }
  json.Key("device");
  if (profile.device.empty()) {
    json.Null();
  } else {
    json.String(profile.device);
  }
  json.Key("precision").String(profile.precision);
  json.Key("flops_source").String(profile.flops_source);
  WriteCountedSummary(profile, json);
  json.Key("latency_basis").String(profile.latency_basis);
  json.Key("steps_note").String(profile.warmup_note);
  json.Key("passes_marked").Bool(profile.passes_marked);
  json.Key("no_gpu_why").String(profile.no_gpu_why);
  json.Key("model_modules").Uint(profile.model_end);  // modules[0, n): the model's tree
  json.Key("peak_flops_per_s");  // MFU's denominator (one GPU, profile.precision); null: unknown
  if (profile.peak_flops_per_s) {
    json.Double(*profile.peak_flops_per_s);
  } else {
    json.Null();
  }
  WriteStepWindow(profile.step_scope, json);
  WriteSummary(profile, json);
  json.Key("memory").BeginArray();  // each rank's memory ledger (memory_view.h), by rank
  for (const RankMemory& memory : profile.memory) WriteMemoryJson(memory, json);
  json.EndArray();
  json.Key("modules").BeginArray();
  for (const ModuleRow& row : profile.modules) WriteModuleRow(row, json);
  json.EndArray();
  json.EndObject();
}

std::string RenderProfileCsv(const Profile& profile) {
  std::optional<double> total_params;
  std::optional<double> total_macs;
  double total_latency = 0;
  // Shares are of the model root, as in the text (roots after it are not part of its 100 %).
  for (size_t i = 0; i < profile.modules.size(); ++i) {
    const ModuleRow& row = profile.modules[i];
    if (row.depth != 0 || row.path == kUnattributed) continue;
    if (profile.model_end > 0 && i >= profile.model_end) break;
    if (row.params) total_params = total_params.value_or(0) + *row.params;
    if (row.macs) total_macs = total_macs.value_or(0) + *row.macs;
    total_latency += row.latency_s;
  }
  std::string out =
      "path,class,depth,params,params_pct,macs,macs_pct,latency_s,latency_pct,flops,flops_per_s,"
      "latency_min_s,latency_max_s,counted_steps,counted_kernels,name,model_path,ran,container,"
      "figures_from_children";
  for (const PrecisionFlops& entry : profile.flops_by_precision) {
    absl::StrAppend(&out, ",", CsvField("flops:" + entry.precision));
  }
  out += "\n";
  for (const ModuleRow& row : profile.modules) {
    std::vector<std::string> cells = {CsvField(row.path),
                                      CsvField(row.class_name),
                                      absl::StrCat(row.depth),
                                      CsvNumber(row.params),
                                      CsvNumber(Share(row.params, total_params)),
                                      CsvNumber(row.macs),
                                      CsvNumber(Share(row.macs, total_macs)),
                                      CsvNumber(row.latency_s),
                                      CsvNumber(Share(row.latency_s, total_latency)),
                                      CsvNumber(row.flops),
                                      CsvNumber(row.flops_per_s.value),
                                      CsvNumber(row.latency_min_s),
                                      CsvNumber(row.latency_max_s),
                                      absl::StrCat(row.counted_steps),
                                      absl::StrCat(row.counted_kernels),
                                      CsvField(row.name),
                                      CsvField(TreePath(row)),
                                      row.never_ran ? "false" : "true",
                                      row.container ? "true" : "false",
                                      row.figures_from_children ? "true" : "false"};
    for (const PrecisionFlops& entry : profile.flops_by_precision) {
      cells.push_back(PrecisionCell(row, entry.precision));
    }
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

}  // namespace flopscope::client
