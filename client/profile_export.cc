#include "client/profile_export.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace flopscope::client {
namespace {

constexpr char kUnattributed[] = "<unattributed>";

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
          {"fwd_latency_s", &profile.fwd_latency_s},
          {"bwd_latency_s", &profile.bwd_latency_s},
          {"step_latency_s", &profile.step_latency_s},
          {"iter_latency_s", &profile.iter_latency_s},
          {"fwd_flops_per_s", &profile.fwd_flops_per_s},
          {"bwd_flops_per_s", &profile.bwd_flops_per_s},
          {"fwd_bwd_flops_per_s", &profile.fwd_bwd_flops_per_s},
          {"samples_per_s", &profile.samples_per_s},
          {"mfu", &profile.mfu}};
}

std::optional<double> FlopsPerSecond(const ModuleRow& row) {
  if (!row.flops || row.latency_s <= 0) return std::nullopt;
  return *row.flops / row.latency_s;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

std::string CsvNumber(std::optional<double> value) {
  return value ? absl::StrFormat("%.17g", *value) : "";
}

std::optional<double> Share(std::optional<double> part, std::optional<double> total) {
  if (!part || !total || *total <= 0) return std::nullopt;
  return 100 * *part / *total;
}

}  // namespace

void WriteProfileJson(const Profile& profile, JsonWriter& json) {
  json.Key("profile").BeginObject();
  json.Key("scope").String(profile.scope);
  json.Key("world_size").Int(profile.world_size);
  json.Key("dp_size").Int(profile.dp_size);
  json.Key("mp_size").Int(profile.mp_size);
  json.Key("steps").Uint(profile.steps);
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
  json.Key("summary").BeginObject();
  for (const auto& [name, figure] : SummaryFigures(profile)) {
    json.Key(name).BeginObject();
    json.Key("value");
    OptionalDouble(figure->value, json);
    json.Key("note").String(figure->note);
    json.EndObject();
  }
  json.EndObject();
  json.Key("modules").BeginArray();
  for (const ModuleRow& row : profile.modules) {
    json.BeginObject();
    json.Key("path").String(row.path);
    json.Key("class").String(row.class_name);
    json.Key("depth").Uint(row.depth);
    json.Key("params");
    OptionalDouble(row.params, json);
    json.Key("macs");
    OptionalDouble(row.macs, json);
    json.Key("flops");
    OptionalDouble(row.flops, json);
    json.Key("flops_announced").Bool(row.flops_announced);
    json.Key("latency_s").Double(row.latency_s);
    json.Key("flops_per_s");
    OptionalDouble(FlopsPerSecond(row), json);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

std::string RenderProfileCsv(const Profile& profile) {
  std::optional<double> total_params;
  std::optional<double> total_macs;
  double total_latency = 0;
  for (const ModuleRow& row : profile.modules) {
    if (row.depth != 0 || row.path == kUnattributed) continue;
    if (row.params) total_params = total_params.value_or(0) + *row.params;
    if (row.macs) total_macs = total_macs.value_or(0) + *row.macs;
    total_latency += row.latency_s;
  }
  std::string out =
      "path,class,depth,params,params_pct,macs,macs_pct,latency_s,latency_pct,flops,flops_per_s\n";
  for (const ModuleRow& row : profile.modules) {
    const std::vector<std::string> cells = {CsvField(row.path),
                                            CsvField(row.class_name),
                                            absl::StrCat(row.depth),
                                            CsvNumber(row.params),
                                            CsvNumber(Share(row.params, total_params)),
                                            CsvNumber(row.macs),
                                            CsvNumber(Share(row.macs, total_macs)),
                                            CsvNumber(row.latency_s),
                                            CsvNumber(Share(row.latency_s, total_latency)),
                                            CsvNumber(row.flops),
                                            CsvNumber(FlopsPerSecond(row))};
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

}  // namespace flopscope::client
