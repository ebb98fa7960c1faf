#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/catalog.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::daemon {

// Answers the client: job and rank listings from the catalog, reports from each rank file's
// module_stats and small tables (ReportBuilder), never by scanning raw kernels.
// Errors: INVALID_ARGUMENT for a malformed job id; NOT_FOUND "job 'x' not found" and
// "job 'x' has no rank 3 (ranks: 0-1)".
//
// Thread-safe: the Catalog is, and every report opens its own read connections.
class QueryService final : public v1::Query::Service {
 public:
  QueryService(std::string data_dir, Catalog* catalog)
      : data_dir_(std::move(data_dir)), catalog_(catalog) {}

  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ListRanks(grpc::ServerContext* context, const v1::ListRanksRequest* request,
                         v1::ListRanksResponse* response) override;
  grpc::Status GetReport(grpc::ServerContext* context, const v1::ReportRequest* request,
                         v1::Report* response) override;

  // The report itself, for callers in the same process (tests, bench).
  absl::StatusOr<v1::Report> BuildReport(const v1::ReportRequest& request);

 private:
  // The job's ranks, or the error for an unknown or malformed job id.
  absl::StatusOr<std::vector<v1::RankInfo>> RanksOf(const std::string& job_id);

  const std::string data_dir_;
  Catalog* catalog_;
};

// "0-3,5,7-8" for ranks {0,1,2,3,5,7,8} (sorted, duplicates ignored).
std::string FormatRankList(std::vector<int32_t> ranks);

}  // namespace flopscope::daemon
