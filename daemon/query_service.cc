#include "daemon/query_service.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "daemon/data_layout.h"
#include "daemon/grpc_status.h"
#include "daemon/logger.h"
#include "daemon/rank_reader.h"
#include "daemon/report_builder.h"

namespace flopscope::daemon {

std::string FormatRankList(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i;  // last index of the run of consecutive ranks starting at i
    while (end + 1 < ranks.size() && ranks[end + 1] == ranks[end] + 1) ++end;
    absl::StrAppend(&out, out.empty() ? "" : ",", ranks[i]);
    if (end > i) absl::StrAppend(&out, "-", ranks[end]);
    i = end + 1;
  }
  return out;
}

grpc::Status QueryService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                    v1::ListJobsResponse* response) {
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  for (v1::JobInfo& job : *jobs) *response->add_jobs() = std::move(job);
  return grpc::Status::OK;
}

grpc::Status QueryService::ListRanks(grpc::ServerContext*, const v1::ListRanksRequest* request,
                                     v1::ListRanksResponse* response) {
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = RanksOf(request->job_id());
  if (!ranks.ok()) return ToGrpcStatus(ranks.status());
  for (v1::RankInfo& rank : *ranks) *response->add_ranks() = std::move(rank);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetReport(grpc::ServerContext*, const v1::ReportRequest* request,
                                     v1::Report* response) {
  absl::StatusOr<v1::Report> report = BuildReport(*request);
  if (!report.ok()) {
    LogDebug("report for job '", request->job_id(), "': ", report.status().message());
    return ToGrpcStatus(report.status());
  }
  *response = *std::move(report);
  return grpc::Status::OK;
}

absl::StatusOr<std::vector<v1::RankInfo>> QueryService::RanksOf(const std::string& job_id) {
  if (std::string problem = JobIdProblem(job_id); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job_id);
  if (ranks.ok() && ranks->empty()) {
    return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  }
  return ranks;
}

absl::StatusOr<v1::Report> QueryService::BuildReport(const v1::ReportRequest& request) {
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = RanksOf(request.job_id());
  if (!ranks.ok()) return ranks.status();
  std::vector<int32_t> known;
  for (const v1::RankInfo& rank : *ranks) known.push_back(rank.rank());
  const std::set<int32_t> wanted(request.ranks().begin(), request.ranks().end());
  for (int32_t rank : wanted) {
    if (std::find(known.begin(), known.end(), rank) == known.end()) {
      return absl::NotFoundError(absl::StrCat("job '", request.job_id(), "' has no rank ", rank,
                                              " (ranks: ", FormatRankList(known), ")"));
    }
  }
  ReportBuilder builder(request.job_id());
  RankReadOptions read_options;
  if (!request.kernels_of().empty()) {
    builder.ListTopKernels(request.kernels_of(), request.top_kernels());
    read_options.kernel_groups = true;
  }
  for (const v1::RankInfo& rank : *ranks) {
    if (!wanted.empty() && !wanted.contains(rank.rank())) continue;
    absl::StatusOr<RankSnapshot> snapshot =
        RankReader::Read(RankFilePath(data_dir_, request.job_id(), rank.rank()), read_options);
    if (!snapshot.ok()) {
      return absl::Status(snapshot.status().code(),
                          absl::StrCat("job '", request.job_id(), "' rank ", rank.rank(), ": ",
                                       snapshot.status().message()));
    }
    builder.AddRank(rank, *snapshot);
  }
  if (!request.kernels_of().empty() && !builder.KnowsTopKernelsPath()) {
    return absl::NotFoundError(absl::StrCat("job '", request.job_id(), "' has no module '",
                                            request.kernels_of(),
                                            "' (use a path the report prints, or / for all)"));
  }
  return builder.Build();
}

}  // namespace flopscope::daemon
