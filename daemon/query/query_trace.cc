// Query.GetTrace: the raw timeline of a job for `flopscope export`. Part of QueryService (the
// same job and rank lookup as every report), kept apart from query_service.cc; the rank files
// themselves are read by trace_reader.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/base/grpc_status.h"
#include "daemon/base/logger.h"
#include "daemon/query/query_service.h"
#include "daemon/query/trace_reader.h"
#include "daemon/store/left_alone_files.h"

namespace flopscope::daemon {
namespace {

// The report-shaped request WantedRanks and StepWindowOf read (job, ranks, steps).
v1::ReportRequest AsReportRequest(const v1::TraceRequest& request) {
  v1::ReportRequest report;
  report.set_job_id(request.job_id());
  *report.mutable_ranks() = request.ranks();
  if (request.has_first_step()) report.set_first_step(request.first_step());
  if (request.has_last_step()) report.set_last_step(request.last_step());
  return report;
}

v1::TraceChunk ProblemChunk(int32_t rank, const absl::Status& problem) {
  v1::TraceChunk chunk;
  chunk.set_rank(rank);
  chunk.set_problem(std::string(problem.message()));
  return chunk;
}

}  // namespace

grpc::Status QueryService::GetTrace(grpc::ServerContext* context, const v1::TraceRequest* request,
                                    grpc::ServerWriter<v1::TraceChunk>* writer) {
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  // The same read permission as every report of the job (daemon/access/access_policy.h).
  if (absl::Status s = access_->CheckJobAccess(*context, request->job_id(), Access::kRead);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::Status status = ForEachTraceChunk(*request, [&](v1::TraceChunk chunk) {
    return !context->IsCancelled() && writer->Write(chunk);
  });
  if (!status.ok()) LogDebug("trace of job '", request->job_id(), "': ", status.message());
  return ToGrpcStatus(status);
}

absl::Status QueryService::ForEachTraceChunk(const v1::TraceRequest& request,
                                             const std::function<bool(v1::TraceChunk)>& emit) {
  const v1::ReportRequest as_report = AsReportRequest(request);
  absl::StatusOr<std::optional<StepWindowRequest>> steps = StepWindowOf(as_report);
  if (!steps.ok()) return steps.status();
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = WantedRanks(as_report);
  if (!ranks.ok()) return ranks.status();

  // Each rank's time window first, so that a window no rank has fails before anything is sent.
  std::vector<std::optional<TraceWindow>> windows(ranks->size(), TraceWindow{});
  std::vector<absl::Status> problems(ranks->size());
  bool any_step = !steps->has_value();
  for (size_t i = 0; i < ranks->size() && steps->has_value(); ++i) {
    const absl::StatusOr<RankFile> file =
        RankFileForReading(data_dir_, request.job_id(), (*ranks)[i].rank());
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        file.ok() ? readers_.Take(file->path) : file.status();
    absl::StatusOr<std::optional<TraceWindow>> window =
        db.ok() ? StepTimeWindow(**db, **steps) : db.status();
    if (!window.ok()) {
      problems[i] = window.status();
      continue;
    }
    readers_.GiveBack(*std::move(db));
    windows[i] = *window;
    any_step = any_step || window->has_value();
  }
  if (!any_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", request.job_id(),
                     "' has no step in the window (steps are the `step` ranges of "
                     "the flopscope NVTX domain, numbered from 0: see flopscope report)"));
  }

  for (size_t i = 0; i < ranks->size(); ++i) {
    const int32_t rank = (*ranks)[i].rank();
    if (!problems[i].ok()) {
      if (!emit(ProblemChunk(rank, problems[i]))) return absl::CancelledError("client gone");
      continue;
    }
    if (!windows[i].has_value()) continue;  // none of the wanted steps on this rank
    const absl::StatusOr<RankFile> file = RankFileForReading(data_dir_, request.job_id(), rank);
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        file.ok() ? readers_.Take(file->path) : file.status();
    // The rank's first chunk says when its usual file was left alone, as reports do.
    bool first = true;
    const auto emit_noting = [&](v1::TraceChunk chunk) {
      if (first && file.ok() && !file->note.empty()) chunk.set_left_alone(file->note);
      first = false;
      return emit(std::move(chunk));
    };
    absl::Status status =
        db.ok() ? ReadRankTrace(**db, rank, *windows[i], emit_noting) : db.status();
    if (absl::IsCancelled(status)) return status;
    if (!status.ok()) {
      // One unreadable rank loses its own records, not the others'.
      if (!emit(ProblemChunk(rank, status))) return absl::CancelledError("client gone");
      continue;
    }
    readers_.GiveBack(*std::move(db));
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
