#include "client/text/report_text.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/model/memory_ledger.h"
#include "client/model/profile_flops.h"
#include "client/text/human_format.h"
#include "client/text/loss_cause_names.h"
#include "client/text/rejected_batches.h"
#include "client/text/text_table.h"
#include "common/metadata_keys.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::RankInfo;
using flopscope::v1::Report;

constexpr const char* kUnknown = "-";

constexpr size_t kMaxKernelNameWidth = 90;

// The metadata channel's per-module keys (IsPerModuleKey) are shown in the tree, not the header;
// what the injector says about GPUs (gpu.status, gpu.<i>.*, kernels.launch_not_seen) is in the
// rank lines.
bool IsInjectorGpuKey(const std::string& key) {
  return absl::StartsWith(key, "gpu.") || key == "kernels.launch_not_seen";
}

bool HasMemoryActivity(const ModuleStats& module) {
  return module.memcpy_count() > 0 || module.memset_count() > 0;
}

// "2.00 MB", "512 B" (FormatCount's unit letter, or none, then B).
std::string FormatBytes(uint64_t bytes) {
  const std::string count = FormatCount(static_cast<double>(bytes));
  return count + (absl::StrContains(count, ' ') ? "B" : " B");
}

bool HasGpuRecords(const Report& report) {
  for (const ModuleStats& module : report.modules()) {
    if (module.has_gpu_time_ns() || module.kernels() > 0 || HasMemoryActivity(module)) return true;
  }
  return std::any_of(report.ranks().begin(), report.ranks().end(),
                     [](const RankInfo& rank) { return rank.kernels() > 0; });
}

std::string RankLine(const RankInfo& rank) {
  std::string line =
      absl::StrCat("  rank ", rank.rank(), "  host ", rank.host().empty() ? kUnknown : rank.host(),
                   "  pid ", rank.pid());
  for (const auto& device : rank.devices()) {
    absl::StrAppend(&line, "  gpu ", device.index(), ": ", device.name());
    std::vector<std::string> facts;
    if (!device.chip().empty()) facts.push_back(device.chip());
    if (device.sm_count() > 0) facts.push_back(absl::StrCat(device.sm_count(), " SMs"));
    if (!facts.empty()) absl::StrAppend(&line, " (", absl::StrJoin(facts, ", "), ")");
  }
  if (rank.sessions() > 1) absl::StrAppend(&line, "  (restarted: ", rank.sessions(), " sessions)");
  if (rank.connected()) absl::StrAppend(&line, "  (still connected)");
  return PrintableForTerminal(line) + "\n";  // host and device names come from the producer
}

std::string LossesSection(const Report& report) {
  uint64_t total = 0;
  std::vector<std::string> parts;
  for (const auto& loss : report.losses()) {
    if (loss.records() == 0 || CountsSessions(loss.cause())) continue;
    total += loss.records();
    parts.push_back(absl::StrCat(LossCauseName(loss.cause()), " ", FormatCount(loss.records()),
                                 ": ", LossCauseDescription(loss.cause())));
  }
  std::string text;
  if (total > 0) {
    text = absl::StrCat("Lost records: ", total, " (", absl::StrJoin(parts, "; "), ")\n");
  }
  if (const uint64_t unfinished = SessionsWithoutFinal(report.losses()); unfinished > 0) {
    SignalSessions drained, cut_short;
    EndSignalsOf(report.metadata(), &drained, &cut_short);
    absl::StrAppend(&text, "Unfinished: ", SessionsWithoutFinalNote(unfinished, cut_short), "\n");
  }
  if (report.spooled_records() > 0) {
    absl::StrAppend(&text, "Waiting: ", SpooledNote(report.spooled_records()), "\n");
  }
  return text;
}

// Batches the daemon refused, beside the producer's own losses: the daemon counts them where it
// drops them (the producer cannot), by the validator rule each broke, summed over the ranks.
std::string RejectedSection(const Report& report) {
  RejectedBatches rejected;
  for (const RankInfo& rank : report.ranks()) rejected.Add(rank);
  const RejectedBatches::Counts& total = rejected.total;
  if (total.batches == 0) return "";
  std::vector<std::string> parts;
  for (const auto& [rule, counts] : rejected.by_rule) {
    parts.push_back(absl::StrCat(rule, ": ", counts.batches, " / ", counts.records));
  }
  return PrintableForTerminal(absl::StrCat("Rejected by daemon: ", total.batches,
                                           total.batches == 1 ? " batch / " : " batches / ",
                                           total.records,
                                           total.records == 1 ? " record" : " records",
                                           " (rule: ", absl::StrJoin(parts, "; "), ")")) +
         "\n";
}

std::string NoGpuRecordsSection(const Report& report) {
  if (HasGpuRecords(report)) return "";
  std::set<std::string> reasons;
  for (const RankInfo& rank : report.ranks()) {
    if (!rank.gpu_status().empty()) reasons.insert(rank.gpu_status());
  }
  if (reasons.empty()) return "No GPU records (the ranks did not say why)\n";
  if (reasons.size() == 1) {
    return absl::StrCat("No GPU records: ", PrintableForTerminal(*reasons.begin()), "\n");
  }
  std::string out = "No GPU records:\n";
  for (const RankInfo& rank : report.ranks()) {
    absl::StrAppend(
        &out, "  rank ", rank.rank(), ": ",
        rank.gpu_status().empty() ? "(no reason given)" : PrintableForTerminal(rank.gpu_status()),
        "\n");
  }
  return out;
}

// Activities whose launch the injector never saw are under <unattributed>; say how many (the
// injector reports a running total per rank: the last value of each rank's is summed).
std::string LaunchNotSeenSection(const Report& report) {
  uint64_t total = 0;
  uint64_t last = 0;
  for (const auto& entry : report.metadata()) {
    if (entry.key() != "kernels.launch_not_seen") continue;
    uint64_t value = 0;
    if (!absl::SimpleAtoi(entry.value(), &value)) continue;
    // Totals only grow within a rank; a smaller one starts the next rank's.
    if (value < last) total += last;
    last = value;
  }
  total += last;
  if (total == 0) return "";
  return absl::StrCat("GPU activities whose launch was not seen: ", total,
                      " (listed under <unattributed>)\n");
}

std::string AnnouncedSection(const Report& report) {
  std::vector<std::string> facts;
  std::set<std::string> seen;
  for (const auto& entry : report.metadata()) {
    if (IsPerModuleKey(entry.key()) || IsInjectorGpuKey(entry.key()) ||
        IsMemoryLedgerKey(entry.key()) || entry.key() == kEndSignalKey ||
        entry.key() == kEndSignalCutShortKey) {
      continue;
    }
    std::string fact = PrintableForTerminal(absl::StrCat(entry.key(), "=", entry.value()));
    if (seen.insert(fact).second) facts.push_back(std::move(fact));
  }
  if (facts.empty()) return "";
  return absl::StrCat("Announced: ", absl::StrJoin(facts, ", "), "\n");
}

// Sessions whose process a signal ended, drained (kEndSignalKey) or with the drain cut short
// (kEndSignalCutShortKey): named, so that Ctrl-C reads as Ctrl-C and not as a kill.
// "Ended by: SIGINT (Ctrl-C) 2 sessions, ...".
std::string EndSignalSection(const Report& report) {
  SignalSessions drained, cut_short;
  EndSignalsOf(report.metadata(), &drained, &cut_short);
  const std::string note = EndSignalsNote(drained, cut_short);
  return note.empty() ? "" : absl::StrCat("Ended by: ", note, "\n");
}

// Which steps counter windows covered where, and the convention of every fp16 figure.
std::string CountersSection(const Report& report) {
  if (report.counter_windows().empty()) return "";
  std::string out =
      absl::StrCat("Counted steps: ", CountedStepsLine(CountedWindowsOf(report)), "\n");
  uint64_t excluded = 0;
  for (const auto& entry : report.counter_windows()) {
    excluded += entry.window().comm_kernels_excluded();
  }
  if (excluded > 0) {
    // Kernel replay would hang their peers (docs/architecture.md, CUPTI review D1).
    absl::StrAppend(
        &out, excluded,
        " communication kernels excluded (never replayed: no FLOPs counted for them)\n");
  }
  if (!report.fp16_convention().empty()) {
    absl::StrAppend(&out, "FP16 convention: ", PrintableForTerminal(report.fp16_convention()),
                    "\n");
  }
  return out;
}

std::string Header(const Report& report) {
  std::string out =
      absl::StrCat("flopscope report: job ", PrintableForTerminal(report.job_id()), "\n");
  absl::StrAppend(&out, "Ranks: ", report.ranks_size(), "\n");
  for (const RankInfo& rank : report.ranks()) out += RankLine(rank);
  out += AnnouncedSection(report);
  out += LossesSection(report);
  out += EndSignalSection(report);
  out += RejectedSection(report);
  out += NoGpuRecordsSection(report);
  out += LaunchNotSeenSection(report);
  out += CountersSection(report);
  return out;
}

std::string ModuleLabel(const ModuleStats& module) {
  std::string name = module.name();
  if (name.empty()) {
    const size_t slash = module.path().rfind('/');
    name = slash == std::string::npos ? module.path() : module.path().substr(slash + 1);
  }
  std::string label = std::string(2 * static_cast<size_t>(module.depth()), ' ') + name;
  if (!module.domain().empty()) absl::StrAppend(&label, " [", module.domain(), "]");
  return label;
}

std::string ModulesSection(const Report& report) {
  if (report.modules().empty()) {
    return "\nModules: none recorded (no NVTX ranges reached flopscope from this job)\n";
  }
  const auto any = [&](auto predicate) {
    return std::any_of(report.modules().begin(), report.modules().end(), predicate);
  };
  const bool show_gpu =
      any([](const ModuleStats& m) { return m.has_gpu_time_ns() || m.kernels() > 0; });
  const bool show_span = any([](const ModuleStats& m) { return m.has_gpu_span_ns(); });
  const bool show_flops = any([](const ModuleStats& m) { return m.has_flops(); });
  const bool show_params = any([](const ModuleStats& m) { return m.has_params(); });

  std::vector<std::string> headers = {"module", "calls", "CPU total", "CPU/call"};
  if (show_gpu) headers.push_back("GPU time");
  if (show_span) headers.insert(headers.end(), {"GPU span", "GPU busy"});
  if (show_gpu) headers.push_back("kernels");
  if (show_flops) headers.push_back("FLOPs/step");
  if (show_params) headers.push_back("params");
  TextTable table(headers);
  for (const ModuleStats& module : report.modules()) {
    std::vector<std::string> row = {
        ModuleLabel(module), absl::StrCat(module.calls()), FormatDuration(module.cpu_time_ns()),
        module.calls() == 0
            ? kUnknown
            : FormatDuration(module.cpu_time_ns() / static_cast<int64_t>(module.calls()))};
    if (show_gpu) {
      row.push_back(module.has_gpu_time_ns() ? FormatDuration(module.gpu_time_ns()) : kUnknown);
    }
    if (show_span) {
      row.push_back(module.has_gpu_span_ns() ? FormatDuration(module.gpu_span_ns()) : kUnknown);
      row.push_back(module.has_gpu_span_ns() ? FormatDuration(module.gpu_busy_ns()) : kUnknown);
    }
    if (show_gpu) row.push_back(absl::StrCat(module.kernels()));
    if (show_flops) row.push_back(module.has_flops() ? FormatCount(module.flops()) : kUnknown);
    if (show_params) {
      row.push_back(module.has_params() ? FormatCount(static_cast<double>(module.params()))
                                        : kUnknown);
    }
    table.AddRow(std::move(row));
  }
  std::string legend;
  if (show_gpu) {
    legend = show_span ? "GPU time: kernel durations summed; span: first kernel start to last "
                         "end, per call; busy: time some kernel ran, per call\n"
                       : "GPU time: kernel durations summed\n";
  }
  if (show_flops) {
    legend +=
        "FLOPs/step: counted FLOPs per counted step, summed over the ranks; counted steps "
        "are left out of every time\n";
  }
  return absl::StrCat("\nModules (figures include children, summed over ", report.ranks_size(),
                      report.ranks_size() == 1 ? " rank" : " ranks", ")\n", legend, table.Render());
}

std::string MemorySection(const Report& report) {
  TextTable table(
      {"module", "memcpy", "memcpy time", "memcpy bytes", "memset", "memset time", "memset bytes"});
  bool any = false;
  for (const ModuleStats& module : report.modules()) {
    if (!HasMemoryActivity(module)) continue;
    any = true;
    table.AddRow({ModuleLabel(module), absl::StrCat(module.memcpy_count()),
                  FormatDuration(module.memcpy_time_ns()), FormatBytes(module.memcpy_bytes()),
                  absl::StrCat(module.memset_count()), FormatDuration(module.memset_time_ns()),
                  FormatBytes(module.memset_bytes())});
  }
  if (!any) return "";
  return absl::StrCat("\nMemory copies and sets (apart from kernels; include children)\n",
                      table.Render());
}

std::string KernelLabel(const flopscope::v1::KernelSummary& kernel) {
  std::string name = kernel.demangled().empty() ? kernel.name() : kernel.demangled();
  if (name.size() > kMaxKernelNameWidth) {
    TruncateUtf8(kMaxKernelNameWidth - 3, &name);  // never inside a multi-byte character
    name += "...";
  }
  return name;
}

std::string TopKernelsSection(const Report& report) {
  if (report.top_kernels_of().empty()) return "";
  const std::string of = PrintableForTerminal(report.top_kernels_of());
  if (report.top_kernels().empty()) {
    return absl::StrCat("\nTop GPU activities of ", of, ": none\n");
  }
  int64_t all = 0;
  for (const auto& kernel : report.top_kernels()) all += kernel.total_ns();
  TextTable table({"kernel", "calls", "total", "share", "mean", "min", "max", "bytes"});
  for (const auto& kernel : report.top_kernels()) {
    const int64_t mean =
        kernel.count() == 0 ? 0 : kernel.total_ns() / static_cast<int64_t>(kernel.count());
    const double share = all == 0 ? 0.0 : 100.0 * static_cast<double>(kernel.total_ns()) / all;
    table.AddRow({KernelLabel(kernel), absl::StrCat(kernel.count()),
                  FormatDuration(kernel.total_ns()), absl::StrFormat("%.1f%%", share),
                  FormatDuration(mean), FormatDuration(kernel.min_ns()),
                  FormatDuration(kernel.max_ns()),
                  kernel.bytes() == 0 ? kUnknown : FormatBytes(kernel.bytes())});
  }
  return absl::StrCat("\nTop GPU activities of ", of,
                      " (children included; share of the listed total)\n", table.Render());
}

// Counted FLOPs by precision for the whole job (top-level modules and <unattributed>) and each
// of those rows, per counted step summed over the ranks, largest first.
std::string PrecisionSection(const Report& report) {
  std::vector<const ModuleStats*> tops;
  std::map<std::string, double> job;
  for (const ModuleStats& module : report.modules()) {
    if (module.depth() != 0 || module.flops_by_precision().empty()) continue;
    tops.push_back(&module);
    for (const auto& entry : module.flops_by_precision()) job[entry.precision()] += entry.flops();
  }
  if (job.empty()) return "";
  std::vector<std::pair<std::string, double>> sorted(job.begin(), job.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  double total = 0;
  for (const auto& [precision, flops] : sorted) total += flops;
  std::vector<std::string> headers = {"precision", "job", "share"};
  for (const ModuleStats* module : tops) headers.push_back(module->path());
  TextTable table(std::move(headers));
  for (const auto& [precision, flops] : sorted) {
    std::vector<std::string> row = {precision, FormatCount(flops),
                                    absl::StrFormat("%.1f%%", 100 * flops / total)};
    for (const ModuleStats* module : tops) {
      std::string cell = kUnknown;
      for (const auto& entry : module->flops_by_precision()) {
        if (entry.precision() == precision) cell = FormatCount(entry.flops());
      }
      row.push_back(std::move(cell));
    }
    table.AddRow(std::move(row));
  }
  return absl::StrCat("\nCounted FLOPs per counted step by precision (summed over the ranks)\n",
                      table.Render());
}

std::string PhasesSection(const Report& report) {
  if (report.phases().empty()) {
    return "\nSteps and phases: none recorded (no `step` range in the flopscope NVTX domain)\n";
  }
  const bool show_flops = std::any_of(report.phases().begin(), report.phases().end(),
                                      [](const PhaseStats& phase) { return phase.has_flops(); });
  std::vector<std::string> headers = {"phase", "calls", "CPU total", "mean", "min", "max"};
  if (show_flops) headers.push_back("FLOPs/step");
  TextTable table(std::move(headers));
  for (const PhaseStats& phase : report.phases()) {
    std::vector<std::string> row = {
        phase.name(),
        absl::StrCat(phase.calls()),
        FormatDuration(phase.cpu_time_ns()),
        phase.calls() == 0
            ? kUnknown
            : FormatDuration(phase.cpu_time_ns() / static_cast<int64_t>(phase.calls())),
        FormatDuration(phase.min_ns()),
        FormatDuration(phase.max_ns())};
    if (show_flops) row.push_back(phase.has_flops() ? FormatCount(phase.flops()) : kUnknown);
    table.AddRow(std::move(row));
  }
  return absl::StrCat("\nSteps and phases\n", table.Render());
}

}  // namespace

std::string RenderTopKernelsText(const Report& report) {
  std::string out =
      absl::StrCat("flopscope report: job ", PrintableForTerminal(report.job_id()), ", ",
                   report.ranks_size(), report.ranks_size() == 1 ? " rank" : " ranks", "\n");
  out += NoGpuRecordsSection(report);
  out += LaunchNotSeenSection(report);
  return out + TopKernelsSection(report);
}

std::string RenderDropsText(const Report& report) {
  return LossesSection(report) + RejectedSection(report);
}

std::string RenderReportText(const Report& report) {
  return Header(report) + ModulesSection(report) + PrecisionSection(report) +
         MemorySection(report) + TopKernelsSection(report) + PhasesSection(report);
}

}  // namespace flopscope::client
