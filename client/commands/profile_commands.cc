#include "client/commands/profile_commands.h"

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/connect/step_window.h"
#include "client/documents/html_report.h"
#include "client/documents/output_file.h"
#include "client/documents/per_rank_export.h"
#include "client/documents/profile_export.h"
#include "client/documents/report_json.h"
#include "client/model/group_profiles.h"
#include "client/text/deepspeed_format.h"
#include "client/text/diff_view.h"
#include "client/text/profile_text.h"
#include "client/text/report_text.h"
#include "client/text/text_table.h"
#include "common/job_id.h"
#include "common/json/json_writer.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

using flopscope::v1::RankInfo;
using flopscope::v1::Report;

absl::StatusOr<ProfileOptions> ToProfileOptions(const ReportOptions& options) {
  return ParseProfileOptions(options.peak_tflops, options.precision);
}

// Whether `format` draws the phases' per-step times: only the report document does (JSON and
// the HTML page's step chart). The others ask the daemon to leave them out: they are most of a
// long job's report (about 4 MB of a 64-rank, 3000-step one).
bool DrawsStepTimes(const std::string& format) { return format == "json" || format == "html"; }

flopscope::v1::ReportRequest RequestOf(const std::string& job, const std::vector<int>& ranks,
                                       const std::optional<StepWindow>& steps, bool step_times) {
  flopscope::v1::ReportRequest request;
  request.set_job_id(job);
  request.set_omit_step_times(!step_times);
  for (int rank : ranks) request.add_ranks(rank);
  if (steps) {
    request.set_first_step(steps->first);
    if (steps->last) request.set_last_step(*steps->last);
  }
  return request;
}

absl::StatusOr<Report> ReportOf(const DaemonClient& daemon, const std::string& job,
                                const std::vector<int>& ranks,
                                const std::optional<StepWindow>& steps, bool step_times) {
  return daemon.GetReport(RequestOf(job, ranks, steps, step_times));
}

// The steps a report covers when --steps is not given: from step 1 (step 0 is warm-up), else
// every step when the job marks only one, else the whole run (no step marked). `note` says so.
// `report` is the report of `window` when choosing fetched it, so that it is not asked for twice
// (each report reads every rank's file).
struct ChosenSteps {
  std::optional<StepWindow> window;
  std::string note;
  std::optional<Report> report;
};

absl::StatusOr<ChosenSteps> ChooseSteps(const DaemonClient& daemon, const std::string& job,
                                        const std::vector<int>& ranks,
                                        const std::optional<StepWindow>& asked, bool step_times) {
  if (asked) return ChosenSteps{asked, "", std::nullopt};
  const std::vector<ChosenSteps> tries = {
      {StepWindow{1, std::nullopt}, "step 0 left out as warm-up (--steps 0: keeps it)",
       std::nullopt},
      {StepWindow{0, std::nullopt}, "one step marked: it is the whole profile (warm-up included)",
       std::nullopt},
  };
  for (const ChosenSteps& chosen : tries) {
    absl::StatusOr<Report> report = ReportOf(daemon, job, ranks, chosen.window, step_times);
    if (report.ok()) return ChosenSteps{chosen.window, chosen.note, *std::move(report)};
    // INVALID_ARGUMENT: no step in the window; anything else is a real failure.
    if (report.status().code() != absl::StatusCode::kInvalidArgument) return report.status();
  }
  return ChosenSteps{std::nullopt, "no step marked: figures are totals over the whole run",
                     std::nullopt};
}

// The ranks of each model replica (by dp_rank), in rank order.
std::map<uint32_t, std::vector<int>> ReplicaRanks(const flopscope::v1::ListRanksResponse& ranks) {
  std::map<uint32_t, std::vector<int>> replicas;
  for (const RankInfo& rank : ranks.ranks()) {
    replicas[rank.layout().dp_rank()].push_back(rank.rank());
  }
  return replicas;
}

absl::StatusOr<Profile> ReplicaProfile(const DaemonClient& daemon, const ReportOptions& options,
                                       const ProfileOptions& profile_options,
                                       const std::optional<StepWindow>& steps, uint32_t replica,
                                       const std::vector<int>& ranks) {
  std::vector<Profile> profiles;
  for (int rank : ranks) {
    absl::StatusOr<Report> report = ReportOf(daemon, options.job_id, {rank}, steps, false);
    if (!report.ok()) return report.status();
    profiles.push_back(BuildProfile(*report, profile_options));
  }
  return CombineModelReplica(
      profiles, profile_options,
      absl::StrCat("model replica ", replica, ", ranks ", absl::StrJoin(ranks, ","),
                   ": params and FLOPs summed, latency the max"));
}

// The DeepSpeed layout has no place for what was dropped: the producers' losses and the batches
// the daemon refused close the additions, when there are any.
std::string WithDrops(std::string text, const Report& report) {
  return text + RenderDropsText(report);
}

// The report document (--format json), and the HTML page that embeds it: the profile, then each
// rank's own figures over the same steps (`per_rank`, one more request) and the text report's
// line per module (`text_rows`, the page's hover text).
absl::StatusOr<std::string> RenderDocument(const DaemonClient& daemon, const Report& report,
                                           const Profile& profile, const ReportOptions& options,
                                           const flopscope::v1::ReportRequest& request) {
  absl::StatusOr<ProfileOptions> profile_options = ToProfileOptions(options);
  if (!profile_options.ok()) return profile_options.status();
  absl::StatusOr<std::vector<RankLatencies>> ranks =
      FetchRankLatencies(daemon, request, *profile_options);
  if (!ranks.ok()) return ranks.status();
  std::string document = RenderReportJson(report, [&](JsonWriter& json) {
    WriteProfileJson(profile, json);
    WritePerRankJson(profile, *ranks, report, json);
    json.Key("text_rows").BeginArray();
    for (size_t i = 0; i < profile.modules.size(); ++i) json.String(DetailedRow(profile, i));
    json.EndArray();
  });
  if (options.format == "json") return document;
  return RenderReportHtml(document, options.job_id);
}

absl::StatusOr<std::string> Render(const DaemonClient& daemon, const Report& report,
                                   const Profile& profile, const ReportOptions& options,
                                   const flopscope::v1::ReportRequest& request) {
  if (options.format == "csv") return RenderProfileCsv(profile);
  if (options.format == "json" || options.format == "html") {
    return RenderDocument(daemon, report, profile, options, request);
  }
  return WithDrops(RenderProfileText(profile, {.depth = options.depth, .top = options.top}),
                   report);
}

std::string RenderSpread(const std::string& job, const std::vector<ModuleSpread>& rows,
                         const std::vector<std::vector<int>>& replica_ranks,
                         const std::string& format) {
  auto ranks_of = [&](int replica) {
    return replica < 0 ? std::string("-") : absl::StrJoin(replica_ranks[replica], ",");
  };
  if (format == "json") {
    JsonWriter json;
    json.BeginObject().Key("job").String(job).Key("dp_spread").BeginArray();
    for (const ModuleSpread& row : rows) {
      json.BeginObject().Key("path").String(row.path).Key("replicas").Int(row.replicas);
      json.Key("mean_s").Double(row.mean_s).Key("min_s").Double(row.min_s);
      json.Key("max_s").Double(row.max_s).Key("spread_s").Double(row.spread_s);
      json.Key("spread_pct").Double(row.spread_pct).Key("slowest_replica").Int(row.slowest);
      json.EndObject();
    }
    json.EndArray().EndObject();
    return json.Finish();
  }
  if (format == "csv") {
    std::string out = "path,replicas,mean_s,min_s,max_s,spread_s,spread_pct,slowest_replica\n";
    for (const ModuleSpread& row : rows) {
      absl::StrAppend(&out,
                      row.path.find_first_of(",\"") == std::string::npos
                          ? row.path
                          : absl::StrCat("\"", row.path, "\""),
                      ",", row.replicas, ",", row.mean_s, ",", row.min_s, ",", row.max_s, ",",
                      row.spread_s, ",", row.spread_pct, ",", row.slowest, "\n");
    }
    return out;
  }
  TextTable table({"module", "mean", "min", "max", "spread", "spread %", "slowest (ranks)"});
  for (const ModuleSpread& row : rows) {
    table.AddRow({std::string(2 * row.depth, ' ') + row.path, DurationToString(row.mean_s),
                  DurationToString(row.min_s), DurationToString(row.max_s),
                  DurationToString(row.spread_s), RoundedG(row.spread_pct) + "%",
                  absl::StrCat(row.slowest, " (", ranks_of(row.slowest), ")")});
  }
  return absl::StrCat("flopscope report: job ", PrintableForTerminal(job),
                      "\nLatency per step across the ", replica_ranks.size(),
                      " data-parallel replicas (each the max over its model-parallel ranks):\n",
                      table.Render());
}

}  // namespace

absl::StatusOr<int> ParseGroup(const std::string& group) {
  if (group == "dp") return -1;
  int replica = 0;
  if (group.size() > 3 && group.substr(0, 3) == "mp:" &&
      absl::SimpleAtoi(group.substr(3), &replica) && replica >= 0) {
    return replica;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--group '", group, "' is not known (use mp:K for model replica K, or dp)"));
}

absl::StatusOr<std::string> RenderProfileReport(const DaemonClient& daemon,
                                                const ReportOptions& options) {
  absl::StatusOr<ProfileOptions> profile_options = ToProfileOptions(options);
  if (!profile_options.ok()) return profile_options.status();
  absl::StatusOr<std::optional<StepWindow>> asked = ParseStepWindow(options.steps);
  if (!asked.ok()) return asked.status();
  absl::StatusOr<ChosenSteps> chosen =
      ChooseSteps(daemon, options.job_id, options.ranks, *asked, DrawsStepTimes(options.format));
  if (!chosen.ok()) return chosen.status();
  const std::optional<StepWindow>* steps = &chosen->window;
  if (options.group.empty()) {
    absl::StatusOr<Report> report = chosen->report
                                        ? *std::move(chosen->report)
                                        : ReportOf(daemon, options.job_id, options.ranks, *steps,
                                                   DrawsStepTimes(options.format));
    if (!report.ok()) return report.status();
    Profile profile = BuildProfile(*report, *profile_options);
    profile.warmup_note = chosen->note;
    return Render(daemon, *report, profile, options,
                  RequestOf(options.job_id, options.ranks, *steps, false));
  }
  absl::StatusOr<int> group = ParseGroup(options.group);
  if (!group.ok()) return group.status();
  if (!options.ranks.empty()) {
    return absl::InvalidArgumentError("--group and --rank cannot be combined");
  }
  absl::StatusOr<flopscope::v1::ListRanksResponse> ranks = daemon.ListRanks(options.job_id);
  if (!ranks.ok()) return ranks.status();
  const std::map<uint32_t, std::vector<int>> replicas = ReplicaRanks(*ranks);
  if (*group >= 0) {
    auto replica = replicas.find(static_cast<uint32_t>(*group));
    if (replica == replicas.end()) {
      return absl::NotFoundError(absl::StrCat("job '", options.job_id, "' has no model replica ",
                                              *group, " (", replicas.size(), " replicas)"));
    }
    absl::StatusOr<Profile> profile =
        ReplicaProfile(daemon, options, *profile_options, *steps, replica->first, replica->second);
    if (!profile.ok()) return profile.status();
    absl::StatusOr<Report> report =
        ReportOf(daemon, options.job_id, replica->second, *steps, DrawsStepTimes(options.format));
    if (!report.ok()) return report.status();
    return Render(daemon, *report, *profile, options,
                  RequestOf(options.job_id, replica->second, *steps, false));
  }
  if (options.format == "html") {
    return absl::InvalidArgumentError(
        "--format html shows one profile: use it without --group dp (or with --group mp:K)");
  }
  std::vector<Profile> profiles;
  std::vector<std::vector<int>> replica_ranks;
  for (const auto& [replica, members] : replicas) {
    absl::StatusOr<Profile> profile =
        ReplicaProfile(daemon, options, *profile_options, *steps, replica, members);
    if (!profile.ok()) return profile.status();
    profiles.push_back(*std::move(profile));
    replica_ranks.push_back(members);
  }
  return RenderSpread(options.job_id, DataParallelSpread(profiles), replica_ranks, options.format);
}

absl::Status DiffCommand(const DiffOptions& options) {
  if (options.format != "text" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", options.format, "' is not known (use text or json)"));
  }
  absl::StatusOr<std::optional<StepWindow>> asked = ParseStepWindow(options.steps);
  if (!asked.ok()) return asked.status();
  std::vector<Profile> profiles;
  const DaemonClient daemon(options.socket, options.tls);
  for (const std::string& job : {options.job_a, options.job_b}) {
    if (std::string problem = JobIdProblem(job); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("job '", job, "': ", problem));
    }
    std::vector<int> ranks;
    if (options.rank >= 0) ranks.push_back(options.rank);
    // The report's steps and statistic: medians per step, warm-up left out unless --steps.
    absl::StatusOr<ChosenSteps> chosen = ChooseSteps(daemon, job, ranks, *asked, false);
    if (!chosen.ok()) return chosen.status();
    absl::StatusOr<Report> report = chosen->report
                                        ? *std::move(chosen->report)
                                        : ReportOf(daemon, job, ranks, chosen->window, false);
    if (!report.ok()) return report.status();
    profiles.push_back(BuildProfile(*report, {}));
    profiles.back().warmup_note = chosen->note;
  }
  return WriteOutput(
      options.output,
      RenderDiff(profiles[0], profiles[1], DiffProfiles(profiles[0], profiles[1]), options.format));
}

}  // namespace flopscope::client
