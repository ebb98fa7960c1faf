#include "client/commands/counters_command.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands/chip_names.h"
#include "client/text/text_table.h"
#include "common/flop_formulas.h"
#include "common/json/json_writer.h"

#ifdef FLOPSCOPE_HAVE_COUNTERS
#include "counters/host_object.h"
#include "counters/metric_catalog.h"
#include "counters/metric_planner.h"
#include "counters/profiler_host_api.h"
#endif

namespace flopscope::client {
namespace {

absl::Status CheckOptions(const CountersOptions& options) {
  if (options.format != "text" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", options.format, "' is not known (use text or json)"));
  }
  if (options.set != "full" && options.set != "cheap") {
    return absl::InvalidArgumentError(
        absl::StrCat("--set '", options.set, "' is not known (use full or cheap)"));
  }
  if (options.list_chips == !options.chip.empty()) {
    return absl::InvalidArgumentError("give either --chip CHIP or --list-chips");
  }
  return absl::OkStatus();
}

#ifdef FLOPSCOPE_HAVE_COUNTERS

namespace counters = flopscope::counters;

// The libcupti that answered, and its Host API.
struct Cupti {
  counters::ProfilerHostApi api;
  counters::CuptiLibrary library;
};

absl::StatusOr<Cupti> LoadCupti(const std::string& path) {
  Cupti cupti;
  std::string error;
  if (!counters::LoadProfilerHostApi(path, &cupti.api, &cupti.library, &error)) {
    return absl::FailedPreconditionError(error);
  }
  return cupti;
}

void WriteCupti(const counters::CuptiLibrary& library, JsonWriter& json) {
  json.Key("cupti").BeginObject();
  json.Key("path").String(library.path);
  json.Key("version").Uint(library.version);
  json.EndObject();
}

std::string CuptiLine(const counters::CuptiLibrary& library) {
  return absl::StrCat("CUPTI Profiler Host API: ", library.path, " (version ", library.version,
                      ")\n");
}

// ---- --list-chips ----

absl::StatusOr<std::string> RenderChips(const Cupti& cupti, const std::string& format) {
  counters::MetricPlanner planner(cupti.api);
  std::vector<std::string> chips;
  std::string error;
  if (!planner.SupportedChips(&chips, &error)) return absl::InternalError(error);
  if (format == "json") {
    JsonWriter json;
    json.BeginObject();
    json.Key("chips").BeginArray();
    for (const std::string& chip : chips) {
      const std::string_view family = counters::MetricFamilyOf(chip);
      json.BeginObject().Key("chip").String(chip).Key("family");
      if (family.empty()) {
        json.Null();  // timing only on this chip
      } else {
        json.String(family);
      }
      json.EndObject();
    }
    json.EndArray();
    WriteCupti(cupti.library, json);
    json.EndObject();
    return json.Finish();
  }
  TextTable table({"CHIP", "METRIC FAMILY"});
  for (const std::string& chip : chips) {
    const std::string_view family = counters::MetricFamilyOf(chip);
    table.AddRow({chip, family.empty() ? "- (timing only)" : std::string(family)});
  }
  return absl::StrCat(CuptiLine(cupti.library), "\n", table.Render());
}

// ---- --chip ----

struct MetricRow {
  std::string name;
  counters::MetricMeaning meaning;
  std::string description;  // CUPTI's
};

std::vector<MetricRow> DescribePlan(const Cupti& cupti, const counters::MetricPlan& plan) {
  counters::HostObject host;
  std::string error;
  const bool can_describe = host.Initialize(cupti.api, plan.chip, nullptr, 0, &error);
  std::vector<MetricRow> rows;
  for (const std::string& metric : plan.metrics) {
    MetricRow row{metric, counters::DescribeMetric(metric), ""};
    // A missing description loses a column, not the listing.
    if (can_describe) host.Describe(metric, &row.description, &error);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FlopsEach(const counters::MetricMeaning& meaning) {
  return meaning.flops_per_count > 0 ? absl::StrCat(meaning.flops_per_count) : "-";
}

std::string PlanJson(const counters::MetricPlan& plan, const std::vector<MetricRow>& rows,
                     const Cupti& cupti) {
  JsonWriter json;
  json.BeginObject();
  json.Key("chip").String(plan.chip);
  json.Key("family").String(counters::MetricFamilyOf(plan.chip));
  json.Key("set").String(counters::MetricSetName(plan.kind));
  json.Key("passes").Uint(plan.passes);
  json.Key("metrics").BeginArray();
  for (const MetricRow& row : rows) {
    json.BeginObject();
    json.Key("name").String(row.name);
    json.Key("measures").String(counters::MetricCategoryName(row.meaning.category));
    json.Key("precision").String(row.meaning.precision);
    json.Key("flops_per_count").Double(row.meaning.flops_per_count);
    json.Key("unit").String(row.meaning.unit);
    json.Key("description").String(row.description);
    json.EndObject();
  }
  json.EndArray();
  json.Key("rejected").BeginArray();
  for (const auto& [metric, reason] : plan.rejected) {
    json.BeginObject().Key("name").String(metric).Key("reason").String(reason).EndObject();
  }
  json.EndArray();
  json.Key("fp16_convention").String(kFp16Convention);
  WriteCupti(cupti.library, json);
  json.EndObject();
  return json.Finish();
}

std::string PlanText(const counters::MetricPlan& plan, const std::vector<MetricRow>& rows,
                     const Cupti& cupti) {
  std::string text = absl::StrCat(
      "chip ", plan.chip, " (family ", std::string(counters::MetricFamilyOf(plan.chip)), "), set ",
      counters::MetricSetName(plan.kind), ": ", plan.metrics.size(), " metrics, ", plan.passes,
      " replay passes per counted kernel\n", CuptiLine(cupti.library), "\n");
  TextTable table({"METRIC", "MEASURES", "PRECISION/SOURCE", "FLOPS EACH", "UNIT"});
  for (const MetricRow& row : rows) {
    table.AddRow({row.name, counters::MetricCategoryName(row.meaning.category),
                  row.meaning.precision.empty() ? "-" : row.meaning.precision,
                  FlopsEach(row.meaning), row.meaning.unit.empty() ? "-" : row.meaning.unit});
  }
  absl::StrAppend(&text, table.Render(), "\n");
  if (plan.rejected.empty()) {
    absl::StrAppend(&text, "rejected: none\n");
  } else {
    absl::StrAppend(&text, "rejected by CUPTI (not collected):\n");
    for (const auto& [metric, reason] : plan.rejected) {
      absl::StrAppend(&text, "  ", metric, ": ", reason, "\n");
    }
  }
  absl::StrAppend(&text, "fp16 convention: ", kFp16Convention, "\n");
  return text;
}

// --chip as CUPTI names it: a chip name in any case, or a product (H100 -> GH100, chip_names.h).
// INVALID_ARGUMENT, listing what is accepted, for a name that is neither.
absl::StatusOr<std::string> ResolveChip(const Cupti& cupti, const std::string& name) {
  counters::MetricPlanner planner(cupti.api);
  std::vector<std::string> chips;
  std::string error;
  if (!planner.SupportedChips(&chips, &error)) return absl::InternalError(error);
  std::string chip = ChipForName(name, chips);
  if (!chip.empty()) return chip;
  return absl::InvalidArgumentError(absl::StrCat(
      "chip '", name, "' is not known; accepted: the chips of this CUPTI (",
      absl::StrJoin(chips, ", "), ") or a product name (", ChipAliasList(),
      "), in any case, spaces and dashes ignored; see flopscope counters --list-chips"));
}

absl::StatusOr<std::string> RenderPlan(const Cupti& cupti, const CountersOptions& options) {
  counters::MetricSetKind kind = counters::MetricSetKind::kFull;
  if (!counters::ParseMetricSetKind(options.set, &kind)) {
    return absl::InvalidArgumentError(absl::StrCat("--set '", options.set, "' is not known"));
  }
  absl::StatusOr<std::string> resolved = ResolveChip(cupti, options.chip);
  if (!resolved.ok()) return resolved.status();
  const std::string& chip = *resolved;
  counters::MetricPlanner planner(cupti.api);
  counters::MetricPlan plan;
  std::string error;
  if (!planner.Plan(chip, kind, nullptr, 0, &plan, &error)) {
    std::vector<std::string> ignored;
    // No family is the user's to fix (another chip name); anything else is CUPTI's failure.
    if (!counters::CandidateMetrics(chip, kind, &ignored)) {
      return absl::InvalidArgumentError(
          absl::StrCat(error, "; see flopscope counters --list-chips"));
    }
    return absl::InternalError(error);
  }
  const std::vector<MetricRow> rows = DescribePlan(cupti, plan);
  return options.format == "json" ? PlanJson(plan, rows, cupti) : PlanText(plan, rows, cupti);
}

#endif  // FLOPSCOPE_HAVE_COUNTERS

}  // namespace

absl::StatusOr<std::string> RenderCounters(const CountersOptions& options) {
  if (absl::Status status = CheckOptions(options); !status.ok()) return status;
#ifdef FLOPSCOPE_HAVE_COUNTERS
  absl::StatusOr<Cupti> cupti = LoadCupti(options.cupti_path);
  if (!cupti.ok()) return cupti.status();
  return options.list_chips ? RenderChips(*cupti, options.format) : RenderPlan(*cupti, options);
#else
  return absl::FailedPreconditionError(
      "this flopscope was built without CUPTI (no CUDA toolkit found at build time)");
#endif
}

absl::Status CountersCommand(const CountersOptions& options, std::ostream& out) {
  absl::StatusOr<std::string> text = RenderCounters(options);
  if (!text.ok()) return text.status();
  out << *text;
  return absl::OkStatus();
}

}  // namespace flopscope::client
