#include "client/commands/ranks_command.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/job_id.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ListRanksResponse;

absl::StatusOr<ProfileOptions> ProfileOptionsOf(const RanksOptions& options) {
  return ParseProfileOptions(options.peak_tflops, options.precision);
}

// One rank's answer in the stream, its report already turned into a profile.
struct RankAnswer {
  std::optional<v1::RankInfo> info;  // absent from a daemon older than RankReport.info
  Profile profile;
  std::string problem;
};

// Every rank's report in one streamed request; each becomes a profile as it arrives, so only one
// rank's report is held at a time. In stream order (rank order).
absl::StatusOr<std::vector<std::pair<int32_t, RankAnswer>>> StreamRankAnswers(
    const DaemonClient& daemon, const std::string& job_id, const ProfileOptions& profile_options,
    const std::optional<StepWindow>& steps) {
  v1::ReportRequest request;
  request.set_job_id(job_id);
  request.set_omit_step_times(true);  // the listing draws no step's time
  if (steps) {
    request.set_first_step(steps->first);
    if (steps->last) request.set_last_step(*steps->last);
  }
  std::vector<std::pair<int32_t, RankAnswer>> answers;
  absl::Status status = daemon.GetRankReports(request, [&](v1::RankReport report) {
    RankAnswer& answer = answers.emplace_back(report.rank(), RankAnswer{}).second;
    if (report.has_info()) answer.info = std::move(*report.mutable_info());
    answer.problem = report.problem();
    if (report.has_report()) answer.profile = BuildProfile(report.report(), profile_options);
  });
  if (!status.ok()) return status;
  return answers;
}

// The figures of `ranks`, in their order, from `answers` (by rank); stragglers among them.
std::vector<RankFigures> FiguresInOrder(const ListRanksResponse& ranks,
                                        std::vector<std::pair<int32_t, RankAnswer>> answers,
                                        const StragglerOptions& straggler_options) {
  absl::flat_hash_map<int32_t, RankAnswer*> by_rank;
  for (auto& [rank, answer] : answers) by_rank[rank] = &answer;
  const int count = ranks.ranks_size();
  std::vector<Profile> profiles(count);
  std::vector<std::string> problems(count, "the daemon sent no report for it");
  for (int i = 0; i < count; ++i) {
    auto it = by_rank.find(ranks.ranks(i).rank());
    if (it == by_rank.end()) continue;  // a rank listed after the stream ended
    profiles[i] = std::move(it->second->profile);
    problems[i] = std::move(it->second->problem);
  }
  std::vector<std::optional<Straggler>> stragglers = FindStragglers(profiles, straggler_options);
  std::vector<RankFigures> figures;
  figures.reserve(profiles.size());
  for (int i = 0; i < count; ++i) {
    figures.push_back({std::move(profiles[i]), std::move(stragglers[i]), std::move(problems[i])});
  }
  return figures;
}

}  // namespace

absl::StatusOr<std::vector<RankFigures>> FetchRankFigures(
    const DaemonClient& daemon, const ListRanksResponse& ranks,
    const ProfileOptions& profile_options, const StragglerOptions& straggler_options) {
  if (ranks.ranks_size() == 0) return std::vector<RankFigures>{};
  absl::StatusOr<std::vector<std::pair<int32_t, RankAnswer>>> answers =
      StreamRankAnswers(daemon, ranks.ranks(0).job_id(), profile_options, std::nullopt);
  if (!answers.ok()) return answers.status();
  return FiguresInOrder(ranks, *std::move(answers), straggler_options);
}

namespace {

// The answers over the steps `report` takes (profile_commands.cc ChooseSteps): `asked`, else
// from step 1 (step 0 is warm-up), else every step when no rank has a step 1, else the whole
// run when no rank marks steps. A try fails when every rank's answer is a problem.
absl::StatusOr<std::vector<std::pair<int32_t, RankAnswer>>> AnswersOverTheSteps(
    const DaemonClient& daemon, const std::string& job_id, const ProfileOptions& profile_options,
    const std::optional<StepWindow>& asked, std::string* note) {
  if (asked) return StreamRankAnswers(daemon, job_id, profile_options, asked);
  const std::vector<std::pair<std::optional<StepWindow>, const char*>> tries = {
      {StepWindow{1, std::nullopt}, "step 0 left out as warm-up (--steps 0: keeps it)"},
      {StepWindow{0, std::nullopt}, "one step marked: it is the whole profile (warm-up included)"},
      {std::nullopt, "no step marked: figures are totals over the whole run"}};
  absl::StatusOr<std::vector<std::pair<int32_t, RankAnswer>>> answers;
  for (const auto& [window, why] : tries) {
    answers = StreamRankAnswers(daemon, job_id, profile_options, window);
    *note = why;
    if (!answers.ok()) return answers.status();
    const bool any_report = std::any_of(answers->begin(), answers->end(), [](const auto& answer) {
      return answer.second.problem.empty();
    });
    if (any_report) break;
  }
  return answers;
}

}  // namespace

absl::StatusOr<RankListing> FetchRankListing(const DaemonClient& daemon, const std::string& job_id,
                                             const ProfileOptions& profile_options,
                                             const StragglerOptions& straggler_options,
                                             const std::optional<StepWindow>& steps) {
  std::string steps_note;
  absl::StatusOr<std::vector<std::pair<int32_t, RankAnswer>>> answers =
      AnswersOverTheSteps(daemon, job_id, profile_options, steps, &steps_note);
  if (!answers.ok()) return answers.status();
  RankListing listing;
  listing.steps_note = std::move(steps_note);
  const bool described = std::all_of(answers->begin(), answers->end(),
                                     [](const auto& answer) { return answer.second.info; });
  if (described) {
    for (auto& [rank, answer] : *answers) *listing.ranks.add_ranks() = std::move(*answer.info);
  } else {
    // A daemon from before RankReport.info: the list is one more request.
    absl::StatusOr<ListRanksResponse> listed = daemon.ListRanks(job_id);
    if (!listed.ok()) return listed.status();
    listing.ranks = *std::move(listed);
  }
  for (auto& rank : *listing.ranks.mutable_ranks()) {
    if (rank.job_id().empty()) rank.set_job_id(job_id);
  }
  listing.figures = FiguresInOrder(listing.ranks, *std::move(answers), straggler_options);
  return listing;
}

absl::StatusOr<std::string> RenderRanksListing(const DaemonClient& daemon,
                                               const RanksOptions& options) {
  if (options.format != "text" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", options.format, "' is not known (use text or json)"));
  }
  if (std::string problem = JobIdProblem(options.job_id); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", options.job_id, "': ", problem));
  }
  if (options.slow_pct < 0) {
    return absl::InvalidArgumentError("--slow-pct must be 0 or more");
  }
  absl::StatusOr<ProfileOptions> profile_options = ProfileOptionsOf(options);
  if (!profile_options.ok()) return profile_options.status();
  absl::StatusOr<std::optional<StepWindow>> steps = ParseStepWindow(options.steps);
  if (!steps.ok()) return steps.status();
  absl::StatusOr<RankListing> listing = FetchRankListing(
      daemon, options.job_id, *profile_options, {.threshold_pct = options.slow_pct}, *steps);
  if (!listing.ok()) return listing.status();
  if (options.format == "json") return RenderRanksJson(listing->ranks, listing->figures);
  // The steps said first, as `report` says them: every figure below is over them.
  std::string text =
      listing->steps_note.empty() ? "" : absl::StrCat("Steps: ", listing->steps_note, "\n");
  return text + RenderRanksText(listing->ranks, listing->figures);
}

}  // namespace flopscope::client
