// Query.GetOpenRanges: every rank's latest snapshot of open ranges for `flopscope where`. Part of
// QueryService (the same job lookup and access check as every report), kept apart from
// query_service.cc; the rank files themselves are read by open_ranges_reader.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/base/grpc_status.h"
#include "daemon/base/logger.h"
#include "daemon/query/open_ranges_reader.h"
#include "daemon/query/query_service.h"
#include "daemon/store/left_alone_files.h"

namespace flopscope::daemon {

grpc::Status QueryService::GetOpenRanges(grpc::ServerContext* context,
                                         const v1::OpenRangesRequest* request,
                                         v1::OpenRangesResponse* response) {
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  // The same read permission as every report of the job (daemon/access/access_policy.h).
  if (absl::Status s = access_->CheckJobAccess(*context, request->job_id(), Access::kRead);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<v1::OpenRangesResponse> answer =
      BuildOpenRanges(request->job_id(), absl::GetCurrentTimeNanos());
  if (!answer.ok()) {
    LogDebug("open ranges of job '", request->job_id(), "': ", answer.status().message());
    return ToGrpcStatus(answer.status());
  }
  *response = *std::move(answer);
  return grpc::Status::OK;
}

absl::StatusOr<v1::OpenRangesResponse> QueryService::BuildOpenRanges(const std::string& job_id,
                                                                     int64_t now_ns) {
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = RanksOf(job_id);
  if (!ranks.ok()) return ranks.status();
  v1::OpenRangesResponse response;
  response.set_job_id(job_id);
  response.set_now_ns(now_ns);
  for (const v1::RankInfo& info : *ranks) {
    v1::RankOpenRanges& rank = *response.add_ranks();
    rank.set_rank(info.rank());
    rank.set_connected(info.connected());
    const absl::StatusOr<RankFile> file = RankFileForReading(data_dir_, job_id, info.rank());
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        file.ok() ? readers_.Take(file->path) : file.status();
    absl::StatusOr<std::optional<OpenRangesSnapshot>> snapshot =
        db.ok() ? ReadLatestOpenRanges(**db) : db.status();
    if (db.ok()) readers_.GiveBack(*std::move(db));
    if (!snapshot.ok()) {
      rank.set_problem(std::string(snapshot.status().message()));
      continue;
    }
    if (!snapshot->has_value()) continue;
    rank.set_has_snapshot(true);
    rank.set_snapshot_ns((*snapshot)->time_ns);
    rank.set_session_id((*snapshot)->session_id);
    for (v1::ThreadOpenStack& thread : (*snapshot)->threads) {
      *rank.add_threads() = std::move(thread);
    }
  }
  return response;
}

}  // namespace flopscope::daemon
