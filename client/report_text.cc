#include "client/report_text.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/human_format.h"
#include "client/loss_cause_names.h"
#include "client/text_table.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::RankInfo;
using flopscope::v1::Report;

constexpr const char* kUnknown = "-";

// The metadata channel's per-module keys are shown in the tree, not the header.
bool IsPerModuleKey(const std::string& key) {
  return absl::StartsWith(key, "params ") || absl::StartsWith(key, "flops ");
}

bool HasGpuRecords(const Report& report) {
  for (const ModuleStats& module : report.modules()) {
    if (module.has_gpu_time_ns() || module.kernels() > 0) return true;
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
  }
  if (rank.sessions() > 1) absl::StrAppend(&line, "  (restarted: ", rank.sessions(), " sessions)");
  if (rank.connected()) absl::StrAppend(&line, "  (still connected)");
  return line + "\n";
}

std::string LossesSection(const Report& report) {
  uint64_t total = 0;
  std::vector<std::string> parts;
  for (const auto& loss : report.losses()) {
    if (loss.records() == 0) continue;
    total += loss.records();
    parts.push_back(absl::StrCat(LossCauseName(loss.cause()), " ", FormatCount(loss.records()),
                                 ": ", LossCauseDescription(loss.cause())));
  }
  if (total == 0) return "";
  return absl::StrCat("Lost records: ", total, " (", absl::StrJoin(parts, "; "), ")\n");
}

std::string NoGpuRecordsSection(const Report& report) {
  if (HasGpuRecords(report)) return "";
  std::set<std::string> reasons;
  for (const RankInfo& rank : report.ranks()) {
    if (!rank.gpu_status().empty()) reasons.insert(rank.gpu_status());
  }
  if (reasons.empty()) return "No GPU records (the ranks did not say why)\n";
  if (reasons.size() == 1) return absl::StrCat("No GPU records: ", *reasons.begin(), "\n");
  std::string out = "No GPU records:\n";
  for (const RankInfo& rank : report.ranks()) {
    absl::StrAppend(&out, "  rank ", rank.rank(), ": ",
                    rank.gpu_status().empty() ? "(no reason given)" : rank.gpu_status(), "\n");
  }
  return out;
}

std::string AnnouncedSection(const Report& report) {
  std::vector<std::string> facts;
  std::set<std::string> seen;
  for (const auto& entry : report.metadata()) {
    if (IsPerModuleKey(entry.key())) continue;
    std::string fact = absl::StrCat(entry.key(), "=", entry.value());
    if (seen.insert(fact).second) facts.push_back(std::move(fact));
  }
  if (facts.empty()) return "";
  return absl::StrCat("Announced: ", absl::StrJoin(facts, ", "), "\n");
}

std::string Header(const Report& report) {
  std::string out = absl::StrCat("flopscope report: job ", report.job_id(), "\n");
  absl::StrAppend(&out, "Ranks: ", report.ranks_size(), "\n");
  for (const RankInfo& rank : report.ranks()) out += RankLine(rank);
  out += AnnouncedSection(report);
  out += LossesSection(report);
  out += NoGpuRecordsSection(report);
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
  const bool show_flops = any([](const ModuleStats& m) { return m.has_flops(); });
  const bool show_params = any([](const ModuleStats& m) { return m.has_params(); });

  std::vector<std::string> headers = {"module", "calls", "CPU total", "CPU/call"};
  if (show_gpu) headers.insert(headers.end(), {"GPU time", "kernels"});
  if (show_flops) headers.push_back("FLOPs");
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
      row.push_back(absl::StrCat(module.kernels()));
    }
    if (show_flops) row.push_back(module.has_flops() ? FormatCount(module.flops()) : kUnknown);
    if (show_params) {
      row.push_back(module.has_params() ? FormatCount(static_cast<double>(module.params()))
                                        : kUnknown);
    }
    table.AddRow(std::move(row));
  }
  return absl::StrCat("\nModules (figures include children, summed over ", report.ranks_size(),
                      report.ranks_size() == 1 ? " rank" : " ranks", ")\n", table.Render());
}

std::string PhasesSection(const Report& report) {
  if (report.phases().empty()) {
    return "\nSteps and phases: none recorded (no `step` range in the flopscope NVTX domain)\n";
  }
  TextTable table({"phase", "calls", "CPU total", "mean", "min", "max"});
  for (const PhaseStats& phase : report.phases()) {
    table.AddRow({phase.name(), absl::StrCat(phase.calls()), FormatDuration(phase.cpu_time_ns()),
                  phase.calls() == 0
                      ? kUnknown
                      : FormatDuration(phase.cpu_time_ns() / static_cast<int64_t>(phase.calls())),
                  FormatDuration(phase.min_ns()), FormatDuration(phase.max_ns())});
  }
  return absl::StrCat("\nSteps and phases\n", table.Render());
}

}  // namespace

std::string RenderReportText(const Report& report) {
  return Header(report) + ModulesSection(report) + PhasesSection(report);
}

}  // namespace flopscope::client
