#include "client/text/diff_view.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/text/deepspeed_format.h"
#include "client/text/text_table.h"
#include "common/json/json_writer.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

std::optional<double> Rate(std::optional<double> flops, std::optional<double> seconds) {
  if (!flops || !seconds || *seconds <= 0) return std::nullopt;
  return *flops / *seconds;
}

std::string Text(std::optional<double> value,
                 std::string (*format)(double, const std::string&, int)) {
  return value ? format(*value, "", 2) : "-";
}

std::string Change(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return a ? "gone" : "new";
  const double delta = *b - *a;
  std::string text = absl::StrCat(delta < 0 ? "-" : "+", DurationToString(std::fabs(delta)));
  if (*a > 0) absl::StrAppend(&text, " (", delta < 0 ? "" : "+", RoundedG(100 * delta / *a), "%)");
  return text;
}

void Optional(JsonWriter& json, const char* key, std::optional<double> value) {
  json.Key(key);
  if (value) {
    json.Double(*value);
  } else {
    json.Null();
  }
}

// "steps 1-9" / "step 3" / "whole run (no step marked)": the steps a side's medians come from.
std::string StepsOf(const Profile& profile) {
  const StepScope& steps = profile.step_scope;
  if (steps.last_step < steps.first_step) return "whole run (no step marked)";
  if (steps.last_step == steps.first_step) return absl::StrCat("step ", steps.first_step);
  return absl::StrCat("steps ", steps.first_step, "-", steps.last_step);
}

void WriteSteps(const Profile& profile, JsonWriter& json) {
  json.BeginObject();
  json.Key("first").Int(profile.step_scope.first_step);
  json.Key("last").Int(profile.step_scope.last_step);
  json.Key("note").String(profile.warmup_note);
  json.EndObject();
}

}  // namespace

std::vector<ModuleDiff> DiffProfiles(const Profile& a, const Profile& b) {
  std::vector<ModuleDiff> rows;
  absl::flat_hash_map<std::string, size_t> index;
  auto row_for = [&](const std::string& path) -> ModuleDiff& {
    auto [it, added] = index.try_emplace(path, rows.size());
    if (added) {
      ModuleDiff row;
      row.path = path;
      rows.push_back(row);
    }
    return rows[it->second];
  };
  for (const ModuleRow& module : a.modules) {
    if (module.path == kUnattributed) continue;
    ModuleDiff& row = row_for(module.path);
    row.latency_a = module.latency_s;
    row.flops_a = module.flops;
  }
  for (const ModuleRow& module : b.modules) {
    if (module.path == kUnattributed) continue;
    ModuleDiff& row = row_for(module.path);
    row.latency_b = module.latency_s;
    row.flops_b = module.flops;
  }
  for (ModuleDiff& row : rows) {
    row.impact_s = std::fabs(row.latency_b.value_or(0) - row.latency_a.value_or(0));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ModuleDiff& x, const ModuleDiff& y) {
    if (x.impact_s != y.impact_s) return x.impact_s > y.impact_s;
    return x.path < y.path;
  });
  return rows;
}

std::string RenderDiff(const Profile& a, const Profile& b, const std::vector<ModuleDiff>& rows,
                       const std::string& format) {
  if (format == "json") {
    JsonWriter json;
    json.BeginObject().Key("a").String(a.job_id).Key("b").String(b.job_id);
    json.Key("iter_latency_s").BeginObject();
    Optional(json, "a", a.iter_latency_s.value);
    Optional(json, "b", b.iter_latency_s.value);
    json.EndObject().Key("steps").BeginObject().Key("a");
    WriteSteps(a, json);
    json.Key("b");
    WriteSteps(b, json);
    json.EndObject().Key("modules").BeginArray();
    for (const ModuleDiff& row : rows) {
      json.BeginObject().Key("path").String(row.path);
      Optional(json, "latency_s_a", row.latency_a);
      Optional(json, "latency_s_b", row.latency_b);
      Optional(json, "flops_a", row.flops_a);
      Optional(json, "flops_b", row.flops_b);
      Optional(json, "flops_per_s_a", Rate(row.flops_a, row.latency_a));
      Optional(json, "flops_per_s_b", Rate(row.flops_b, row.latency_b));
      json.Key("impact_s").Double(row.impact_s).EndObject();
    }
    json.EndArray().EndObject();
    return json.Finish();
  }
  TextTable table(
      {"module", "latency A", "latency B", "change", "flops A", "flops B", "FLOPS A", "FLOPS B"});
  for (const ModuleDiff& row : rows) {
    table.AddRow({row.path, Text(row.latency_a, DurationToString),
                  Text(row.latency_b, DurationToString), Change(row.latency_a, row.latency_b),
                  Text(row.flops_a, NumberToString), Text(row.flops_b, NumberToString),
                  Text(Rate(row.flops_a, row.latency_a), FlopsToString),
                  Text(Rate(row.flops_b, row.latency_b), FlopsToString)});
  }
  return absl::StrCat(
      "flopscope diff: A = job ", PrintableForTerminal(a.job_id), ", B = job ",
      PrintableForTerminal(b.job_id),
      " (forward latency, medians per step, sorted by latency change)\n", "steps: A ", StepsOf(a),
      ", B ", StepsOf(b), a.warmup_note.empty() ? "" : absl::StrCat(" (", a.warmup_note, ")"), "\n",
      "iter latency: ", Text(a.iter_latency_s.value, DurationToString), " -> ",
      Text(b.iter_latency_s.value, DurationToString),
      "; fwd+bwd FLOPS per GPU: ", Text(a.fwd_bwd_flops_per_s.value, FlopsToString), " -> ",
      Text(b.fwd_bwd_flops_per_s.value, FlopsToString), "\n", table.Render());
}

}  // namespace flopscope::client
