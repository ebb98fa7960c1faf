#include "client/commands/counter_window_command.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/connect/daemon_client.h"
#include "common/job_id.h"
#include "common/utf8.h"

namespace flopscope::client {

using flopscope::v1::CounterWindowAnswer;
using flopscope::v1::OpenCounterWindowRequest;
using flopscope::v1::OpenCounterWindowResponse;

absl::StatusOr<OpenCounterWindowRequest> BuildCounterWindowRequest(
    const CounterWindowOptions& options) {
  if (std::string problem = JobIdProblem(options.job_id); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", options.job_id, "': ", problem));
  }
  if (!options.old_steps.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--steps ", options.old_steps, " is now --count ", options.old_steps,
        " (how many of the next steps to count); `--steps A:B` is the report's step window"));
  }
  if (options.steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--count N is required: how many of the next steps to count (1 or more), got ",
                     options.steps));
  }
  if (!options.metric_set.empty() && options.metric_set != "full" &&
      options.metric_set != "cheap") {
    return absl::InvalidArgumentError(
        absl::StrCat("--set '", options.metric_set, "' is not known (use full or cheap)"));
  }
  if (options.timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout-ms must be 1 or more, got ", options.timeout_ms));
  }
  OpenCounterWindowRequest request;
  request.set_job_id(options.job_id);
  for (int rank : options.ranks) {
    if (rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--rank ", rank, ": ranks start at 0"));
    }
    request.add_ranks(rank);
  }
  request.set_steps(static_cast<uint32_t>(options.steps));
  request.set_metric_set(options.metric_set);
  request.set_timeout_ms(static_cast<uint32_t>(options.timeout_ms));
  return request;
}

int AcceptedRankCount(const OpenCounterWindowResponse& response) {
  std::set<int32_t> accepted;
  for (const CounterWindowAnswer& answer : response.answers()) {
    if (answer.accepted()) accepted.insert(answer.rank());
  }
  return static_cast<int>(accepted.size());
}

std::string RenderCounterWindowAnswers(const OpenCounterWindowResponse& response) {
  std::map<int32_t, int> answers_per_rank;
  for (const CounterWindowAnswer& answer : response.answers()) ++answers_per_rank[answer.rank()];
  std::vector<std::string> labels;
  size_t width = 0;
  for (const CounterWindowAnswer& answer : response.answers()) {
    std::string label = absl::StrCat("rank ", answer.rank());
    // Normally one process per rank; when a rank has more, say which process answered.
    if (answers_per_rank[answer.rank()] > 1 && !answer.session_id().empty()) {
      absl::StrAppend(&label, " (session ", PrintableForTerminal(answer.session_id()), ")");
    }
    width = std::max(width, label.size());
    labels.push_back(std::move(label));
  }
  std::string out;
  for (int i = 0; i < response.answers_size(); ++i) {
    const CounterWindowAnswer& answer = response.answers(i);
    std::string line = absl::StrFormat("%-*s  %-8s  %s", static_cast<int>(width), labels[i],
                                       answer.accepted() ? "accepted" : "refused",
                                       PrintableForTerminal(answer.message()));
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks for an empty message
    absl::StrAppend(&out, line, "\n");
  }
  const size_t ranks = answers_per_rank.size();
  absl::StrAppend(&out, AcceptedRankCount(response), " of ", ranks,
                  ranks == 1 ? " rank accepted\n" : " ranks accepted\n");
  return out;
}

absl::StatusOr<int> CounterWindowCommand(const CounterWindowOptions& options, std::ostream& out) {
  absl::StatusOr<OpenCounterWindowRequest> request = BuildCounterWindowRequest(options);
  if (!request.ok()) return request.status();
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<OpenCounterWindowResponse> response = daemon.OpenCounterWindow(*request);
  if (!response.ok()) return response.status();
  out << RenderCounterWindowAnswers(*response);
  out.flush();
  return AcceptedRankCount(*response) > 0 ? 0 : 1;
}

}  // namespace flopscope::client
