#include "client/profile_text.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/deepspeed_format.h"
#include "client/profile_flops.h"
#include "client/text_table.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

constexpr int kLabelWidth = 70;
constexpr size_t kPrecisionColumns = 6;  // top-level modules in the precision table

std::string Rule(const std::string& title) {
  const int width = 86;
  const int dashes = std::max<int>(width - static_cast<int>(title.size()) - 2, 2);
  return absl::StrCat(std::string(dashes / 2, '-'), " ", title, " ",
                      std::string(dashes - dashes / 2, '-'), "\n");
}

// `value` may be producer text (device name, flops source): printable only.
std::string Line(const std::string& label, const std::string& value) {
  return absl::StrFormat("%-*s  %s\n", kLabelWidth, label, PrintableForTerminal(value));
}

// The value, or "-" and why; an estimate carries its label.
std::string Shown(const Figure& figure, const std::function<std::string(double)>& format) {
  if (!figure.value) return absl::StrCat("-  (", figure.note, ")");
  if (figure.note.empty()) return format(*figure.value);
  return absl::StrCat(format(*figure.value), "  (", figure.note, ")");
}

std::string Params(double value) { return ParamsToString(value); }
std::string Number(double value) { return NumberToString(value); }
std::string Duration(double value) { return DurationToString(value); }
std::string Flops(double value) { return FlopsToString(value); }
std::string Macs(double macs) { return MacsToString(macs); }

std::string PythonQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : PrintableForTerminal(text)) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

struct ClassTotals {
  std::optional<double> params;
  std::optional<double> macs;
  double latency_s = 0;
};

void Accumulate(std::optional<double>& sum, std::optional<double> value) {
  if (value) sum = sum.value_or(0) + *value;
}

// "{'Sequential': '61.71 K'}": the top `top` classes by one figure, as Python prints a dict.
std::string TopClasses(const std::map<std::string, ClassTotals>& classes, int top,
                       const std::function<std::optional<double>(const ClassTotals&)>& get,
                       const std::function<std::string(double)>& format) {
  std::vector<std::pair<std::string, double>> ranked;
  for (const auto& [name, totals] : classes) {
    if (std::optional<double> value = get(totals)) ranked.emplace_back(name, *value);
  }
  if (ranked.empty()) return "-";
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (static_cast<int>(ranked.size()) > top) ranked.resize(std::max(top, 0));
  std::vector<std::string> items;
  for (const auto& [name, value] : ranked) {
    items.push_back(absl::StrCat(PythonQuoted(name), ": ", PythonQuoted(format(value))));
  }
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

struct Totals {
  std::optional<double> params;
  std::optional<double> macs;
  double latency_s = 0;
};

Totals RootTotals(const Profile& profile) {
  Totals totals;
  for (const ModuleRow& row : profile.modules) {
    if (row.depth != 0 || row.path == kUnattributed) continue;
    Accumulate(totals.params, row.params);
    Accumulate(totals.macs, row.macs);
    totals.latency_s += row.latency_s;
  }
  return totals;
}

std::string Percent(double part, std::optional<double> total) {
  const double share = total && *total > 0 ? 100 * part / *total : 0;
  return RoundedG(share) + "%";
}

// "- FLOPS", with the reason when some other module has FLOPs (else the header says why).
std::string ModuleRate(const ModuleRow& row, bool any_flops) {
  if (row.flops_per_s.value) return FlopsToString(*row.flops_per_s.value);
  if (!any_flops || row.flops_per_s.note.empty()) return "- FLOPS";
  return absl::StrCat("- FLOPS (", row.flops_per_s.note, ")");
}

std::string ModuleFigures(const ModuleRow& row, const Totals& totals, bool any_flops) {
  std::vector<std::string> parts;
  parts.push_back(row.params ? absl::StrCat(ParamsToString(*row.params), " = ",
                                            Percent(*row.params, totals.params), " Params")
                             : "- Params");
  parts.push_back(row.macs ? absl::StrCat(MacsToString(*row.macs), " = ",
                                          Percent(*row.macs, totals.macs), " MACs")
                           : "- MACs");
  parts.push_back(absl::StrCat(DurationToString(row.latency_s), " = ",
                               Percent(row.latency_s, totals.latency_s), " latency"));
  parts.push_back(ModuleRate(row, any_flops));
  if (row.flops_announced) parts.push_back("announced flops");
  if (row.flops_disagree) {
    const double difference = 100 * (*row.flops / *row.announced_flops - 1);
    parts.push_back(absl::StrCat("measured flops differ from the announced ",
                                 NumberToString(*row.announced_flops), " by ",
                                 difference > 0 ? "+" : "", RoundedG(difference), "%"));
  }
  if (row.latency_min_s && row.latency_max_s) {
    parts.push_back(absl::StrCat("step min ", DurationToString(*row.latency_min_s), " max ",
                                 DurationToString(*row.latency_max_s)));
  }
  return absl::StrJoin(parts, ", ");
}

// Module and class names are producer text: printable only.
std::string ModuleHead(const ModuleRow& row) {
  if (row.depth == 0) {
    return PrintableForTerminal(
        row.class_name == row.name ? row.name : absl::StrCat(row.name, ": ", row.class_name));
  }
  return PrintableForTerminal(absl::StrCat("(", row.name, "): ", row.class_name));
}

}  // namespace

std::string RenderSummary(const Profile& profile) {
  std::string out = Rule("flopscope Flops Profile (DeepSpeed layout)");
  const StepScope& steps = profile.step_scope;
  const std::string over = steps.window
                               ? absl::StrCat("steps ", steps.first_step, "-", steps.last_step)
                           : profile.steps > 0 ? absl::StrCat(profile.steps, " steps")
                                               : "the whole run";
  absl::StrAppend(&out, "Profile Summary over ", over, " (", PrintableForTerminal(profile.scope),
                  "):\n");
  absl::StrAppend(&out, "Latencies: ", PrintableForTerminal(profile.latency_basis), "\n");
  absl::StrAppend(
      &out,
      "Notations:\n"
      "data parallel size (dp_size), model parallel size(mp_size),\n"
      "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
      "number of floating-point operations (flops), floating-point operations per second "
      "(FLOPS),\n"
      "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
      "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n");
  absl::StrAppend(&out, Line("world size: ", absl::StrCat(profile.world_size)));
  absl::StrAppend(&out, Line("data parallel size: ", absl::StrCat(profile.dp_size)));
  absl::StrAppend(&out, Line("model parallel size: ", absl::StrCat(profile.mp_size)));
  absl::StrAppend(&out, Line("batch size per GPU: ", profile.batch_size
                                                         ? absl::StrCat(*profile.batch_size)
                                                         : "-  (not announced: batch_size=<n>)"));
  absl::StrAppend(&out, Line("params per GPU: ", Shown(profile.params_per_gpu, Params)));
  absl::StrAppend(&out, Line("params of model = params per GPU * mp_size: ",
                             Shown(profile.params_of_model, Params)));
  absl::StrAppend(&out, Line("fwd MACs per GPU: ", Shown(profile.fwd_macs_per_gpu, Macs)));
  absl::StrAppend(&out, Line("fwd flops per GPU: ", Shown(profile.fwd_flops_per_gpu, Number)));
  absl::StrAppend(&out, Line("fwd flops of model = fwd flops per GPU * mp_size: ",
                             Shown(profile.fwd_flops_of_model, Number)));
  absl::StrAppend(&out, Line("bwd flops per GPU: ", Shown(profile.bwd_flops_per_gpu, Number)));
  absl::StrAppend(&out, Line("fwd latency: ", Shown(profile.fwd_latency_s, Duration)));
  absl::StrAppend(&out, Line("bwd latency: ", Shown(profile.bwd_latency_s, Duration)));
  absl::StrAppend(&out, Line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
                             Shown(profile.fwd_flops_per_s, Flops)));
  const bool bwd_measured = profile.bwd_flops_per_gpu.note == kMeasuredBackward;
  absl::StrAppend(&out,
                  Line(bwd_measured ? "bwd FLOPS per GPU = bwd flops per GPU / bwd latency: "
                                    : "bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency: ",
                       Shown(profile.bwd_flops_per_s, Flops)));
  absl::StrAppend(
      &out,
      Line(bwd_measured ? "fwd+bwd FLOPS per GPU = (fwd + bwd flops) / (fwd+bwd latency): "
                        : "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency): ",
           Shown(profile.fwd_bwd_flops_per_s, Flops)));
  absl::StrAppend(&out, Line("step latency: ", Shown(profile.step_latency_s, Duration)));
  absl::StrAppend(&out, Line("iter latency: ", Shown(profile.iter_latency_s, Duration)));
  absl::StrAppend(&out, Line("samples/second: ",
                             Shown(profile.samples_per_s, [](double v) { return RoundedG(v); })));
  absl::StrAppend(&out, Line("MFU = fwd+bwd FLOPS per GPU / peak: ",
                             Shown(profile.mfu, [](double v) { return RoundedG(100 * v) + "%"; })));
  absl::StrAppend(
      &out, Line("device: ", profile.device.empty() ? "-  (no GPU recorded)" : profile.device));
  absl::StrAppend(&out, Line("flops: ", profile.flops_source));
  absl::StrAppend(&out, RenderCountedFlops(profile));
  return out;
}

std::string RenderCountedFlops(const Profile& profile) {
  std::string out;
  if (!profile.counter_windows.empty()) {
    absl::StrAppend(&out, Line("counted steps: ", CountedStepsLine(profile.counter_windows)));
  }
  if (profile.flops_by_precision.empty()) return out;
  absl::StrAppend(&out, Line("fp16 convention: ", profile.fp16_convention.empty()
                                                      ? "-  (not stated by the daemon)"
                                                      : profile.fp16_convention));
  // The whole job, then each top-level module with counted FLOPs (at most kPrecisionColumns).
  std::vector<const ModuleRow*> tops;
  for (const ModuleRow& row : profile.modules) {
    if ((row.depth == 0 || row.path == kUnattributed) && !row.flops_by_precision.empty() &&
        tops.size() < kPrecisionColumns) {
      tops.push_back(&row);
    }
  }
  std::vector<std::string> headers = {"precision", "job", "share"};
  for (const ModuleRow* row : tops) headers.push_back(row->name.empty() ? row->path : row->name);
  TextTable table(std::move(headers));
  double total = 0;
  for (const PrecisionFlops& entry : profile.flops_by_precision) total += entry.flops;
  for (const PrecisionFlops& entry : profile.flops_by_precision) {
    std::vector<std::string> cells = {entry.precision, NumberToString(entry.flops),
                                      Percent(entry.flops, total)};
    for (const ModuleRow* row : tops) {
      auto found =
          std::find_if(row->flops_by_precision.begin(), row->flops_by_precision.end(),
                       [&](const PrecisionFlops& p) { return p.precision == entry.precision; });
      cells.push_back(found == row->flops_by_precision.end() ? "-" : NumberToString(found->flops));
    }
    table.AddRow(std::move(cells));
  }
  absl::StrAppend(&out, "\nCounted flops by precision, per GPU and step (from ",
                  profile.counted_ranks, profile.counted_ranks == 1 ? " rank" : " ranks",
                  "; the dominant precision first):\n", table.Render("  "));
  return out;
}

std::string RenderAggregated(const Profile& profile, const ProfileTextOptions& options) {
  uint32_t levels = 0;
  for (const ModuleRow& row : profile.modules) {
    if (row.path != kUnattributed) levels = std::max(levels, row.depth + 1);
  }
  std::string out = "\n" + Rule("Aggregated Profile per GPU");
  if (levels == 0) return out + "no modules recorded\n";
  absl::StrAppend(&out, "Top ", options.top,
                  " modules in terms of params, MACs or fwd latency at different model depths:\n");
  // DeepSpeed leaves the deepest level out of its default listing; kept for parity.
  int last = levels >= 2 ? static_cast<int>(levels) - 2 : 0;
  if (options.depth >= 0) last = std::min(options.depth, static_cast<int>(levels) - 1);
  for (int depth = 0; depth <= last; ++depth) {
    std::map<std::string, ClassTotals> classes;
    for (const ModuleRow& row : profile.modules) {
      if (static_cast<int>(row.depth) != depth || row.path == kUnattributed) continue;
      ClassTotals& totals = classes[row.class_name];
      Accumulate(totals.params, row.params);
      Accumulate(totals.macs, row.macs);
      totals.latency_s += row.latency_s;
    }
    absl::StrAppend(&out, "depth ", depth, ":\n");
    absl::StrAppend(
        &out, "    params      - ",
        TopClasses(
            classes, options.top, [](const ClassTotals& t) { return t.params; }, Params),
        "\n");
    absl::StrAppend(&out, "    MACs        - ",
                    TopClasses(
                        classes, options.top, [](const ClassTotals& t) { return t.macs; }, Macs),
                    "\n");
    absl::StrAppend(&out, "    fwd latency - ",
                    TopClasses(
                        classes, options.top,
                        [](const ClassTotals& t) { return std::optional(t.latency_s); }, Duration),
                    "\n");
  }
  return out;
}

std::string RenderDetailed(const Profile& profile, const ProfileTextOptions& options) {
  std::string out = "\n" + Rule("Detailed Profile per GPU");
  absl::StrAppend(
      &out,
      "Each module profile is listed after its name in the following order:\n"
      "params, percentage of total params, MACs, percentage of total MACs, latency, "
      "percentage of total latency, FLOPS\n\n",
      "Note: latency is ",
      std::any_of(profile.modules.begin(), profile.modules.end(),
                  [](const ModuleRow& row) { return row.latency_is_gpu; })
          ? (profile.step_scope.window ? "GPU busy time" : "GPU time")
          : "CPU time, push to pop (no GPU records)",
      profile.step_scope.window ? " per step, the median over the window (step min and max last)"
                                : " per step",
      "; MACs announced, else flops / 2; flops: ", PrintableForTerminal(profile.flops_source),
      ".\n\n");
  const Totals totals = RootTotals(profile);
  const bool any_flops = std::any_of(profile.modules.begin(), profile.modules.end(),
                                     [](const ModuleRow& row) { return row.flops.has_value(); });
  std::vector<uint32_t> open;  // depths of the modules whose ")" is still to come
  auto close_to = [&](uint32_t depth) {
    while (!open.empty() && open.back() >= depth) {
      absl::StrAppend(&out, std::string(2 * open.back(), ' '), ")\n");
      open.pop_back();
    }
  };
  for (size_t i = 0; i < profile.modules.size(); ++i) {
    const ModuleRow& row = profile.modules[i];
    if (options.depth >= 0 && static_cast<int>(row.depth) > options.depth) continue;
    close_to(row.depth);
    const bool has_children = i + 1 < profile.modules.size() &&
                              profile.modules[i + 1].depth > row.depth &&
                              (options.depth < 0 || static_cast<int>(row.depth) < options.depth);
    const std::string indent(2 * row.depth, ' ');
    if (has_children) {
      absl::StrAppend(&out, indent, ModuleHead(row), "(\n", indent, "  ",
                      ModuleFigures(row, totals, any_flops), "\n");
      open.push_back(row.depth);
    } else {
      absl::StrAppend(&out, indent, ModuleHead(row), "(", ModuleFigures(row, totals, any_flops),
                      ")\n");
    }
  }
  close_to(0);
  return out;
}

std::string RenderProfileText(const Profile& profile, const ProfileTextOptions& options) {
  return absl::StrCat("flopscope report: job ", PrintableForTerminal(profile.job_id), "\n\n",
                      RenderSummary(profile), RenderAggregated(profile, options),
                      RenderDetailed(profile, options));
}

}  // namespace flopscope::client
