#include "daemon/control/profiling_service.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_id.h"
#include "common/utf8.h"
#include "daemon/base/grpc_status.h"
#include "daemon/base/logger.h"
#include "daemon/query/query_service.h"

namespace flopscope::daemon {
namespace {

// A process's reply is shown on someone's terminal: bounded, and with no control characters
// (escape sequences) in it.
constexpr size_t kMaxReplyMessageBytes = 1024;

std::string PrintableReply(const std::string& message) {
  std::string out = message.substr(0, kMaxReplyMessageBytes + 1);  // one byte past: see the cut
  TruncateUtf8(kMaxReplyMessageBytes, &out);                       // never inside a UTF-8 sequence
  const bool cut = out.size() < message.size();
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  if (cut) out += "...";
  return out;
}

std::string DescribeRequest(const v1::OpenCounterWindowRequest& request) {
  const std::string ranks = request.ranks().empty()
                                ? "all ranks"
                                : absl::StrCat("ranks ", absl::StrJoin(request.ranks(), ","));
  return absl::StrCat("job ", request.job_id(), " ", ranks, ", ", request.steps(), " steps, set '",
                      request.metric_set().empty() ? "default" : request.metric_set(), "'");
}

std::string DescribeOutcome(const v1::OpenCounterWindowResponse& response) {
  std::set<int32_t> answered, accepted;
  std::vector<std::string> parts;
  for (const v1::CounterWindowAnswer& answer : response.answers()) {
    answered.insert(answer.rank());
    if (answer.accepted()) accepted.insert(answer.rank());
    parts.push_back(absl::StrCat("rank ", answer.rank(),
                                 answer.accepted() ? " accepted" : " refused",
                                 answer.message().empty() ? "" : ": ", answer.message()));
  }
  return absl::StrCat(accepted.size(), " of ", answered.size(), " ranks accepted (",
                      absl::StrJoin(parts, "; "), ")");
}

uint32_t EffectiveTimeoutMs(const v1::OpenCounterWindowRequest& request) {
  return request.timeout_ms() == 0 ? kDefaultControlTimeoutMs : request.timeout_ms();
}

}  // namespace

absl::Status ValidateCounterWindowRequest(const v1::OpenCounterWindowRequest& request) {
  if (std::string problem = JobIdProblem(request.job_id()); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  if (request.steps() == 0 || request.steps() > kMaxCounterWindowSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be 1 to ", kMaxCounterWindowSteps, ", got ", request.steps()));
  }
  const std::string& set = request.metric_set();
  if (!set.empty() && set != "full" && set != "cheap") {
    return absl::InvalidArgumentError(
        absl::StrCat("metric set '", PrintableReply(set), "' is not known (use full or cheap)"));
  }
  for (int32_t rank : request.ranks()) {
    if (rank < 0) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is negative"));
  }
  if (request.timeout_ms() > kMaxControlTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timeout_ms must be at most ", kMaxControlTimeoutMs, ", got ", request.timeout_ms()));
  }
  return absl::OkStatus();
}

grpc::Status ProfilingService::OpenCounterWindow(grpc::ServerContext* context,
                                                 const v1::OpenCounterWindowRequest* request,
                                                 v1::OpenCounterWindowResponse* response) {
  absl::StatusOr<PeerIdentity> caller = access_->Identify(*context);
  absl::Status allowed = caller.status();
  if (allowed.ok()) allowed = access_->CheckJobAccess(*caller, request->job_id(), Access::kProfile);
  if (!allowed.ok()) {
    LogInfo("counter window request refused: ", allowed.message());
    return ToGrpcStatus(allowed);
  }
  // A privileged action: the log names who asked for it.
  LogInfo("counter window in job ", request->job_id(), " asked for by ", DescribePeer(*caller));
  absl::StatusOr<v1::OpenCounterWindowResponse> answers = Open(*request);
  if (!answers.ok()) return ToGrpcStatus(answers.status());
  *response = *std::move(answers);
  return grpc::Status::OK;
}

absl::StatusOr<v1::OpenCounterWindowResponse> ProfilingService::Open(
    const v1::OpenCounterWindowRequest& request) {
  if (absl::Status valid = ValidateCounterWindowRequest(request); !valid.ok()) {
    LogInfo("counter window request rejected: ", valid.message());
    return valid;
  }
  LogInfo("counter window requested: ", DescribeRequest(request));
  absl::StatusOr<std::vector<Target>> targets = SelectTargets(request);
  if (!targets.ok()) {
    LogInfo("counter window for job ", request.job_id(),
            " not opened: ", targets.status().message());
    return targets.status();
  }
  const uint32_t timeout_ms = EffectiveTimeoutMs(request);
  // One deadline for all: the controls are all sent before the first wait.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  SendAll(request, *targets);
  AwaitAll(deadline, timeout_ms, *targets);
  v1::OpenCounterWindowResponse response;
  for (Target& target : *targets) *response.add_answers() = std::move(target.answer);
  LogInfo("counter window for job ", request.job_id(), ": ", DescribeOutcome(response));
  return response;
}

absl::StatusOr<std::vector<ProfilingService::Target>> ProfilingService::SelectTargets(
    const v1::OpenCounterWindowRequest& request) {
  const std::string& job = request.job_id();
  const std::vector<SessionKey> live = sessions_->SessionsOf(job);
  absl::StatusOr<std::vector<v1::RankInfo>> listed = catalog_->ListRanks(job);
  if (!listed.ok()) {
    // The catalog only improves the messages; the live streams decide.
    LogWarning("catalog: ", listed.status().message());
    listed = std::vector<v1::RankInfo>();
  }
  if (live.empty() && listed->empty()) {
    return absl::NotFoundError(absl::StrCat("job '", job, "' not found"));
  }
  std::set<int32_t> known;
  for (const v1::RankInfo& rank : *listed) known.insert(rank.rank());
  for (const SessionKey& session : live) known.insert(session.rank);
  const std::set<int32_t> wanted(request.ranks().begin(), request.ranks().end());

  std::vector<Target> targets;
  std::vector<std::string> missing;
  for (const SessionKey& session : live) {
    if (!wanted.empty() && !wanted.contains(session.rank)) continue;
    Target target{session, /*connected=*/true, nullptr, {}};
    target.answer.set_rank(session.rank);
    target.answer.set_session_id(session.session_id);
    targets.push_back(std::move(target));
  }
  const size_t connected = targets.size();
  for (int32_t rank : wanted) {
    const bool live_rank = std::any_of(live.begin(), live.end(),
                                       [rank](const SessionKey& s) { return s.rank == rank; });
    if (live_rank) continue;
    Target target{{job, rank, ""}, /*connected=*/false, nullptr, {}};
    target.answer.set_rank(rank);
    target.answer.set_message(
        known.contains(rank)
            ? absl::StrCat("rank ", rank,
                           " is not connected (its process ended or lost the daemon)")
            : absl::StrCat("job '", job, "' has no rank ", rank,
                           " (ranks: ", FormatRankList({known.begin(), known.end()}), ")"));
    missing.push_back(target.answer.message());
    targets.push_back(std::move(target));
  }
  if (connected == 0) {
    return absl::FailedPreconditionError(
        wanted.empty() ? absl::StrCat("no rank of job '", job, "' is connected")
                       : absl::StrJoin(missing, "; "));
  }
  std::stable_sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) {
    return a.answer.rank() < b.answer.rank();
  });
  return targets;
}

void ProfilingService::SendAll(const v1::OpenCounterWindowRequest& request,
                               std::vector<Target>& targets) {
  v1::Control control;
  control.mutable_counter_window()->set_steps(request.steps());
  control.mutable_counter_window()->set_metric_set(request.metric_set());
  for (Target& target : targets) {
    if (!target.connected) continue;
    absl::StatusOr<std::shared_ptr<PendingControl>> sent = sessions_->Send(target.session, control);
    if (sent.ok()) {
      target.pending = *std::move(sent);
    } else {
      target.answer.set_message(std::string(sent.status().message()));
    }
  }
}

void ProfilingService::AwaitAll(absl::Time deadline, uint32_t timeout_ms,
                                std::vector<Target>& targets) {
  for (Target& target : targets) {
    if (target.pending == nullptr) continue;
    absl::StatusOr<v1::ControlReply> reply = sessions_->AwaitReply(target.pending, deadline);
    if (reply.ok()) {
      target.answer.set_accepted(reply->accepted());
      target.answer.set_message(PrintableReply(reply->message()));
    } else if (absl::IsDeadlineExceeded(reply.status())) {
      target.answer.set_message(absl::StrCat("no reply within ", timeout_ms, " ms"));
    } else {
      target.answer.set_message(std::string(reply.status().message()));
    }
  }
}

}  // namespace flopscope::daemon
