#include "client/text/profile_text.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/model/profile_flops.h"
#include "client/text/deepspeed_format.h"
#include "client/text/loss_cause_names.h"
#include "client/text/memory_view.h"
#include "client/text/text_table.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

constexpr int kLabelWidth = 70;
constexpr int kValueWidth = 8;
constexpr size_t kPrecisionColumns = 6;  // top-level modules in the precision table

std::string Rule(const std::string& title) {
  const int width = 86;
  const int dashes = std::max<int>(width - static_cast<int>(title.size()) - 2, 2);
  return absl::StrCat(std::string(dashes / 2, '-'), " ", title, " ",
                      std::string(dashes - dashes / 2, '-'), "\n");
}

// The summary's "{:<70}  {:<8}" line, as DeepSpeed's but for the padding after a value shorter
// than 8, which is left off: no line ends in blanks. `value` may be producer text (device name,
// flops source): printable only.
std::string Line(const std::string& label, const std::string& value) {
  const std::string line =
      absl::StrFormat("%-*s  %-*s", kLabelWidth, label, kValueWidth, PrintableForTerminal(value));
  return absl::StrCat(absl::StripTrailingAsciiWhitespace(line), "\n");
}

// Python's str(round(value, 2)) for the samples per second: "433.07", "12.0".
std::string PythonFloat(double value) {
  std::string text = absl::StrFormat("%.2f", value);
  while (text.size() > 1 && text.back() == '0' && text[text.size() - 2] != '.') text.pop_back();
  return text;
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

constexpr char kDeepSpeedBanner[] =
    "-------------------------- DeepSpeed Flops Profiler --------------------------";
constexpr char kAggregatedBanner[] =
    "----------------------------- Aggregated Profile per GPU -----------------------------";
constexpr char kDetailedBanner[] =
    "------------------------------ Detailed Profile per GPU ------------------------------";
constexpr char kClosingRule[] =
    "------------------------------------------------------------------------------";

// Sums per class name at one depth, as DeepSpeed's aggregated profile keeps them.
struct ClassTotals {
  double params = 0;
  double macs = 0;
  double latency_s = 0;
};

// "{'Sequential': '61.71 K'}": the top `top` classes by one figure, as Python prints a dict
// (ties keep the order in which the classes were first met, as Python's sort does).
std::string TopClasses(const std::vector<std::pair<std::string, ClassTotals>>& classes, int top,
                       double ClassTotals::*figure,
                       const std::function<std::string(double)>& format) {
  std::vector<std::pair<std::string, double>> ranked;
  for (const auto& [name, totals] : classes) ranked.emplace_back(name, totals.*figure);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (static_cast<int>(ranked.size()) > top) ranked.resize(std::max(top, 0));
  std::vector<std::string> items;
  for (const auto& [name, value] : ranked) {
    items.push_back(absl::StrCat(PythonQuoted(name), ": ", PythonQuoted(format(value))));
  }
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

// The model root's figures: every percentage of the detailed profile is of them.
struct Totals {
  double params = 0;
  double macs = 0;
  double latency_s = 0;
};

// One past the model's subtree (profile.model_end; the whole list from an older builder).
size_t ModelEnd(const Profile& profile) {
  return std::min(profile.model_end, profile.modules.size());
}

// DeepSpeed: round(100 * part / total, 2) when the total is not 0, else 0.
std::string Percent(double part, double total) {
  return RoundedG(total != 0 ? 100 * part / total : 0) + "%";
}

// "61.71 K = 100% Params, 426.52 MMACs = 100% MACs, 1.2 ms = 100% latency, 355.4 GFLOPS",
// then torch's extra_repr. Unknown figures are 0, as DeepSpeed prints them; the additions
// say why.
std::string ModuleFigures(const ModuleRow& row, const Totals& totals) {
  const double params = row.params.value_or(0);
  const double macs = row.macs.value_or(0);
  std::vector<std::string> parts = {
      absl::StrCat(ParamsToString(params), " = ", Percent(params, totals.params), " Params"),
      absl::StrCat(MacsToString(macs), " = ", Percent(macs, totals.macs), " MACs"),
      absl::StrCat(DurationToString(row.latency_s), " = ", Percent(row.latency_s, totals.latency_s),
                   " latency"),
      FlopsToString(row.flops_per_s.value.value_or(0))};
  if (!row.extra_repr.empty()) parts.push_back(PrintableForTerminal(row.extra_repr));
  return absl::StrJoin(parts, ", ");
}

// `print(model)`'s heads: "LeNet5(" for the root, "(0): Conv2d(" below it. Module and class
// names are producer text: printable only.
std::string ModuleHead(const ModuleRow& row) {
  if (row.depth == 0) return PrintableForTerminal(row.class_name);
  return PrintableForTerminal(absl::StrCat("(", row.name, "): ", row.class_name));
}

// Where a module's flops come from, and a measured figure far from the announced one.
std::string FlopsLabel(const ModuleRow& row) {
  if (!row.flops) return "-";
  if (row.flops_estimated) return "estimated";
  if (row.flops_announced) return "announced";
  if (!row.flops_disagree) return "measured";
  const double difference = 100 * (*row.flops / *row.announced_flops - 1);
  return absl::StrCat("measured flops differ from the announced ",
                      NumberToString(*row.announced_flops), " by ", difference > 0 ? "+" : "",
                      RoundedG(difference), "%");
}

// Per module of the model: fwd and bwd latency per step (medians), the fastest and slowest
// step, the fwd FLOPS or why there is none, and where the flops come from.
std::string PassTable(const Profile& profile) {
  const size_t end = ModelEnd(profile);
  if (end == 0) return "";
  TextTable table(
      {"module", "fwd latency", "bwd latency", "fwd min", "fwd max", "fwd FLOPS", "flops"});
  auto shown = [](const std::optional<double>& value, const std::string& why) {
    return value ? DurationToString(*value) : absl::StrCat("-  (", why, ")");
  };
  for (size_t i = 0; i < end; ++i) {
    const ModuleRow& row = profile.modules[i];
    const std::string name = std::string(2 * row.depth, ' ') + PrintableForTerminal(row.name);
    if (row.never_ran && !row.figures_from_children) {
      // No latency at all: "never ran" alone, never beside a figure.
      table.AddRow({name, absl::StrCat("-  (", NoRangeNote(row), ")"), "-", "-", "-", "-", "-"});
      continue;
    }
    if (row.never_ran) {
      // A container whose children ran: their sums, and what the row is instead of a step range.
      table.AddRow({name, DurationToString(row.latency_s),
                    row.bwd_latency_s ? DurationToString(*row.bwd_latency_s) : "-",
                    "-  (container: sum of its children)", "-",
                    row.flops_per_s.value ? FlopsToString(*row.flops_per_s.value) : "-",
                    FlopsLabel(row)});
      continue;
    }
    table.AddRow({name, DurationToString(row.latency_s),
                  profile.passes_marked ? shown(row.bwd_latency_s, "no backward range")
                                        : "-  (no backward phase marked)",
                  shown(row.latency_min_s, "no step window"),
                  shown(row.latency_max_s, "no step window"),
                  row.flops_per_s.value ? FlopsToString(*row.flops_per_s.value)
                                        : absl::StrCat("-  (", row.flops_per_s.note, ")"),
                  FlopsLabel(row)});
  }
  return absl::StrCat("\nModule latency per step (",
                      profile.passes_marked ? "fwd: its forward ranges; bwd: its backward ranges"
                                            : "no forward/backward phase marked: all its ranges",
                      "):\n", table.Render("  "));
}

// Per module with both a measured (or announced) and an estimated forward FLOPs figure: both,
// and measured / estimated (recompute, padding and slow kernels show up above 1).
std::string EstimateComparison(const Profile& profile) {
  const size_t end = ModelEnd(profile);
  TextTable table({"module", "flops", "source", "estimated", "ratio"});
  bool any = false;
  for (size_t i = 0; i < end; ++i) {
    const ModuleRow& row = profile.modules[i];
    if (!row.flops || !row.estimated_flops) continue;
    any = true;
    table.AddRow({std::string(2 * row.depth, ' ') + PrintableForTerminal(row.name),
                  NumberToString(*row.flops), FlopsSourceOf(row),
                  NumberToString(*row.estimated_flops),
                  *row.estimated_flops > 0 ? RoundedG(*row.flops / *row.estimated_flops)
                                           : "-  (estimate is 0)"});
  }
  if (!any) return "";
  return absl::StrCat("\nForward flops per step, measured or announced against estimated:\n",
                      table.Render("  "));
}

// What each rank said about its GPU, where the ranks differ (one reason for all is in the
// device line already).
std::string GpuStatusLines(const Profile& profile) {
  bool differ = false;
  for (const auto& [rank, status] : profile.gpu_status) {
    differ = differ || status != profile.gpu_status.front().second;
  }
  if (!differ) return "";
  std::string out;
  for (const auto& [rank, status] : profile.gpu_status) {
    absl::StrAppend(&out, Line(absl::StrCat("GPU status of rank ", rank, ": "),
                               status.empty() ? "fine (GPU records kept)" : status));
  }
  return out;
}

// Roots that are not the model (loss, data loader, optimizer, <unattributed>): never in its 100 %.
std::string OutsideTheModel(const Profile& profile) {
  const size_t end = ModelEnd(profile);
  std::string out;
  for (size_t i = end; i < profile.modules.size(); ++i) {
    const ModuleRow& row = profile.modules[i];
    if (row.depth != 0) continue;
    absl::StrAppend(
        &out, "  ", PrintableForTerminal(row.name), ": ", PrintableForTerminal(row.class_name), "(",
        DurationToString(row.all_passes_latency_s), " latency per step",
        row.bwd_latency_s ? absl::StrCat(", bwd ", DurationToString(*row.bwd_latency_s)) : "",
        ")\n");
  }
  if (out.empty()) return "";
  return "\nOutside the model (not part of its 100 %):\n" + out;
}

// FSDP2's shards (`params_shard`): each module of the model some rank holds less of than its
// params, at its full size (the tree's figure) and what each rank holds of it; over more than
// kRankColumns ranks, the fewest and the most held, with their ranks.
std::string ParamsHeldTable(const Profile& profile) {
  constexpr size_t kRankColumns = 8;
  const size_t end = ModelEnd(profile);
  std::set<int32_t> ranks;
  for (size_t i = 0; i < end; ++i) {
    for (const auto& [rank, held] : profile.modules[i].params_held) ranks.insert(rank);
  }
  if (ranks.empty()) return "";
  const bool each = ranks.size() <= kRankColumns;
  std::vector<std::string> headers = {"module", "params"};
  if (each) {
    for (int32_t rank : ranks) headers.push_back(absl::StrCat("rank ", rank));
  } else {
    headers.insert(headers.end(), {"fewest held", "most held"});
  }
  TextTable table(std::move(headers));
  for (size_t i = 0; i < end; ++i) {
    const ModuleRow& row = profile.modules[i];
    if (row.params_held.empty()) continue;
    std::vector<std::string> cells = {PrintableForTerminal(TreePath(row)),
                                      row.params ? Params(*row.params) : "-"};
    if (each) {
      for (int32_t rank : ranks) {
        auto found = std::find_if(row.params_held.begin(), row.params_held.end(),
                                  [&](const auto& entry) { return entry.first == rank; });
        cells.push_back(found == row.params_held.end() ? "-" : Params(found->second));
      }
    } else {
      auto [fewest, most] = std::minmax_element(
          row.params_held.begin(), row.params_held.end(),
          [](const auto& a, const auto& b) { return a.second < b.second; });
      cells.push_back(absl::StrCat(Params(fewest->second), " (rank ", fewest->first, ")"));
      cells.push_back(absl::StrCat(Params(most->second), " (rank ", most->first, ")"));
    }
    table.AddRow(std::move(cells));
  }
  return absl::StrCat(
      "\nParameters held per rank (FSDP2 shards; params above and in the tree are full sizes):\n",
      table.Render("  "));
}

// Where DeepSpeed's flops profiler prints other FLOPs than these (`deepspeed_differs`), each
// reason once, with the modules of the model it holds for and their fwd flops per step.
std::string DeepSpeedDifferences(const Profile& profile) {
  constexpr size_t kShownModules = 4;
  std::vector<std::pair<std::string, std::vector<const ModuleRow*>>> reasons;  // first seen first
  const size_t end = ModelEnd(profile);
  for (size_t i = 0; i < end; ++i) {
    const ModuleRow& row = profile.modules[i];
    if (row.deepspeed_differs.empty()) continue;
    auto found = std::find_if(reasons.begin(), reasons.end(), [&](const auto& entry) {
      return entry.first == row.deepspeed_differs;
    });
    if (found == reasons.end()) found = reasons.insert(reasons.end(), {row.deepspeed_differs, {}});
    found->second.push_back(&row);
  }
  if (reasons.empty()) return "";
  std::string out = "\nWhere DeepSpeed's flops profiler prints other flops, and why:\n";
  for (const auto& [why, rows] : reasons) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < rows.size() && i < kShownModules; ++i) {
      shown.push_back(absl::StrCat(PrintableForTerminal(TreePath(*rows[i])), " (",
                                   rows[i]->flops ? NumberToString(*rows[i]->flops) : "-",
                                   " flops)"));
    }
    if (rows.size() > kShownModules) {
      shown.push_back(absl::StrCat("and ", rows.size() - kShownModules, " more"));
    }
    absl::StrAppend(&out, "  ", PrintableForTerminal(why), "\n    ", rows.size(),
                    rows.size() == 1 ? " module: " : " modules: ", absl::StrJoin(shown, ", "),
                    "\n");
  }
  return out;
}

// The step-to-step period (start of a step to the start of the next, the time between steps
// included) and the samples per second over it, beside DeepSpeed's over the iter latency.
std::string StepToStepLines(const Profile& profile) {
  const std::optional<double>& period = profile.step_scope.step_period_s;
  std::string out = Line("step-to-step period (start to next start, median): ",
                         period ? DurationToString(*period)
                                : "-  (fewer than two steps in a session, or none marked)");
  absl::StrAppend(&out, Line("samples/second over the step-to-step period: ",
                             Shown(profile.samples_per_s_step_to_step, PythonFloat)));
  return out;
}

}  // namespace

std::string RenderSummary(const Profile& profile) {
  std::string out = absl::StrCat("\n", kDeepSpeedBanner, "\n");
  const StepScope& steps = profile.step_scope;
  // DeepSpeed profiles one step; flopscope takes medians per step over a window of them.
  std::string at = "step - (no step marked)";
  // A step that did not finish is in the window but in no figure: the header says so too.
  const std::string unfinished =
      steps.unfinished_steps.empty()
          ? ""
          : absl::StrCat(steps.unfinished_steps.size() == 1 ? "step " : "steps ",
                         absl::StrJoin(steps.unfinished_steps, ", "), " unfinished, left out");
  if (steps.last_step > steps.first_step) {
    at = absl::StrCat("steps ", steps.first_step, "-", steps.last_step, " (medians per step",
                      unfinished.empty() ? "" : "; ", unfinished, ")");
  } else if (steps.last_step == steps.first_step) {
    at = absl::StrCat("step ", steps.first_step, unfinished.empty() ? "" : " (", unfinished,
                      unfinished.empty() ? "" : ")");
  }
  absl::StrAppend(&out, "Profile Summary at ", at, ":\n");
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
  absl::StrAppend(&out, Line("batch size per GPU: ",
                             profile.batch_size ? absl::StrCat(*profile.batch_size)
                                                : absl::StrCat("-  (", kBatchSizeUnknown, ")")));
  absl::StrAppend(&out, Line("params per GPU: ", Shown(profile.params_per_gpu, Params)));
  absl::StrAppend(&out, Line("params of model = params per GPU * mp_size: ",
                             Shown(profile.params_of_model, Params)));
  absl::StrAppend(&out, Line("fwd MACs per GPU: ", Shown(profile.fwd_macs_per_gpu, Macs)));
  absl::StrAppend(&out, Line("fwd flops per GPU: ", Shown(profile.fwd_flops_per_gpu, Number)));
  absl::StrAppend(&out, Line("fwd flops of model = fwd flops per GPU * mp_size: ",
                             Shown(profile.fwd_flops_of_model, Number)));
  absl::StrAppend(&out, Line("fwd latency: ", Shown(profile.fwd_latency_s, Duration)));
  absl::StrAppend(&out, Line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
                             Shown(profile.fwd_flops_per_s, Flops)));
  absl::StrAppend(&out, Line("bwd latency: ", Shown(profile.bwd_latency_s, Duration)));
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
  absl::StrAppend(&out,
                  Line(bwd_measured ? "FLOPS per GPU = (fwd + bwd flops) / iter latency: "
                                    : "FLOPS per GPU = 3 * fwd flops per GPU / iter latency: ",
                       Shown(profile.fwd_bwd_step_flops_per_s, Flops)));
  absl::StrAppend(&out, Line("samples/second: ", Shown(profile.samples_per_s, PythonFloat)));
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
  const size_t end = ModelEnd(profile);
  uint32_t levels = 0;
  for (size_t i = 0; i < end; ++i) levels = std::max(levels, profile.modules[i].depth + 1);
  std::string out = absl::StrCat("\n", kAggregatedBanner, "\n");
  absl::StrAppend(&out, "Top ", options.top,
                  " modules in terms of params, MACs or fwd latency at different model depths:\n");
  // DeepSpeed prints depths 0 .. module_depth - 1 (-1: the deepest level is left out).
  const int shown = options.depth >= 0 ? std::min(options.depth, static_cast<int>(levels))
                                       : std::max(static_cast<int>(levels) - 1, 0);
  for (int depth = 0; depth < shown; ++depth) {
    std::vector<std::pair<std::string, ClassTotals>> classes;  // first seen first
    for (size_t i = 0; i < end; ++i) {
      const ModuleRow& row = profile.modules[i];
      if (static_cast<int>(row.depth) != depth) continue;
      auto found = std::find_if(classes.begin(), classes.end(),
                                [&](const auto& entry) { return entry.first == row.class_name; });
      if (found == classes.end()) found = classes.insert(classes.end(), {row.class_name, {}});
      found->second.params += row.params.value_or(0);
      found->second.macs += row.macs.value_or(0);
      found->second.latency_s += row.latency_s;
    }
    absl::StrAppend(&out, "depth ", depth, ":\n");
    absl::StrAppend(&out, "    params      - ",
                    TopClasses(classes, options.top, &ClassTotals::params, Params), "\n");
    absl::StrAppend(&out, "    MACs        - ",
                    TopClasses(classes, options.top, &ClassTotals::macs, Macs), "\n");
    absl::StrAppend(&out, "    fwd latency - ",
                    TopClasses(classes, options.top, &ClassTotals::latency_s, Duration), "\n");
  }
  return out;
}

std::string RenderDetailed(const Profile& profile, const ProfileTextOptions&) {
  std::string out = absl::StrCat("\n", kDetailedBanner, "\n");
  absl::StrAppend(
      &out,
      "Each module profile is listed after its name in the following order:\n"
      "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
      "percentage of total fwd latency, fwd FLOPS\n",
      "\nNote: 1. Latency is measured by flopscope from the module's ranges inside the forward "
      "phase; the time a parent spends outside its submodules makes up the difference to their "
      "sum.\n"
      "2. MACs and flops are counted by GPU counters where a counter window ran, else announced "
      "or estimated by the framework; the additions below say which.\n"
      "3. The top module's fwd latency covers its own forward ranges only, so it is at most the "
      "fwd latency above, which is the whole forward phase.\n\n");
  const size_t end = ModelEnd(profile);
  if (end == 0) return out + "(no modules recorded)\n";
  const ModuleRow& root = profile.modules[0];
  const Totals totals{root.params.value_or(0), root.macs.value_or(0), root.latency_s};
  std::vector<uint32_t> open;  // depths of the modules whose ")" is still to come
  auto close_to = [&](uint32_t depth) {
    while (!open.empty() && open.back() >= depth) {
      absl::StrAppend(&out, std::string(2 * open.back(), ' '), ")\n");
      open.pop_back();
    }
  };
  for (size_t i = 0; i < end; ++i) {
    const ModuleRow& row = profile.modules[i];
    close_to(row.depth);
    const bool has_children = i + 1 < end && profile.modules[i + 1].depth > row.depth;
    const std::string indent(2 * row.depth, ' ');
    if (has_children) {
      absl::StrAppend(&out, indent, ModuleHead(row), "(\n", indent, "  ",
                      ModuleFigures(row, totals), "\n");
      open.push_back(row.depth);
    } else {
      absl::StrAppend(&out, indent, ModuleHead(row), "(", ModuleFigures(row, totals), ")\n");
    }
  }
  close_to(0);
  return out;
}

std::string DetailedRow(const Profile& profile, size_t index) {
  if (index >= ModelEnd(profile)) return "";
  const ModuleRow& root = profile.modules[0];
  const Totals totals{root.params.value_or(0), root.macs.value_or(0), root.latency_s};
  const ModuleRow& row = profile.modules[index];
  return absl::StrCat(ModuleHead(row), "(", ModuleFigures(row, totals), ")");
}

std::string RenderAdditions(const Profile& profile) {
  std::string out = absl::StrCat("\n", Rule("flopscope additions (not in DeepSpeed's output)"));
  absl::StrAppend(&out, Line("job: ", absl::StrCat(profile.job_id, " (", profile.scope, ")")));
  if (std::string partial = PartialRanksLine(profile); !partial.empty()) {
    absl::StrAppend(&out, Line("ranks: ", partial));
  }
  if (std::string ended = EndSignalsNote(profile.end_signals, profile.cut_short_signals);
      !ended.empty()) {
    absl::StrAppend(&out, Line("ended by: ", ended));
  }
  if (!profile.warmup_note.empty()) absl::StrAppend(&out, Line("steps: ", profile.warmup_note));
  if (std::string unfinished = UnfinishedStepsLine(profile); !unfinished.empty()) {
    absl::StrAppend(&out, Line("unfinished steps: ", unfinished));
  }
  if (std::string accumulation = GradientAccumulationLine(profile); !accumulation.empty()) {
    absl::StrAppend(&out, Line("gradient accumulation: ", accumulation));
  }
  absl::StrAppend(&out, Line("latencies: ", profile.latency_basis));
  absl::StrAppend(&out, Line("step range (measured, median per step): ",
                             Shown(profile.measured_step_range_s, Duration)));
  absl::StrAppend(&out, StepToStepLines(profile));
  absl::StrAppend(&out, Line("MFU = fwd+bwd FLOPS per GPU / peak: ",
                             Shown(profile.mfu, [](double v) { return RoundedG(100 * v) + "%"; })));
  absl::StrAppend(
      &out, Line("device: ",
                 profile.device.empty()
                     ? absl::StrCat(
                           "-  (",
                           profile.no_gpu_why.empty() ? "no GPU recorded" : profile.no_gpu_why, ")")
                     : profile.device));
  absl::StrAppend(&out, GpuStatusLines(profile));
  absl::StrAppend(&out, Line("flops: ", profile.flops_source));
  if (std::string hint = MeasuredFlopsHint(profile); !hint.empty()) {
    absl::StrAppend(&out, Line("measured flops: ", hint));
  }
  absl::StrAppend(&out, Line("bwd flops per GPU: ", Shown(profile.bwd_flops_per_gpu, Number)));
  if (std::none_of(profile.modules.begin(), profile.modules.end(),
                   [](const ModuleRow& row) { return row.flops.has_value(); })) {
    absl::StrAppend(&out, Line("\"0 MACs\" / \"0 FLOPS\" above: ", profile.flops_source));
  }
  absl::StrAppend(&out, RenderCountedFlops(profile));
  absl::StrAppend(&out, PassTable(profile));
  absl::StrAppend(&out, EstimateComparison(profile));
  absl::StrAppend(&out, DeepSpeedDifferences(profile));
  absl::StrAppend(&out, ParamsHeldTable(profile));
  absl::StrAppend(&out, MemoryLedgerSection(profile.memory));
  absl::StrAppend(&out, OutsideTheModel(profile));
  return out;
}

std::string RenderProfileText(const Profile& profile, const ProfileTextOptions& options) {
  // A partial job is said before anything else: every figure below covers those ranks only.
  std::string warnings;
  for (const std::string& warning : {PartialRanksLine(profile), MergedSessionsLine(profile)}) {
    if (!warning.empty()) absl::StrAppend(&warnings, "flopscope: warning: ", warning, "\n");
  }
  return absl::StrCat(warnings, RenderSummary(profile), RenderAggregated(profile, options),
                      RenderDetailed(profile, options), kClosingRule, "\n",
                      RenderAdditions(profile));
}

}  // namespace flopscope::client
