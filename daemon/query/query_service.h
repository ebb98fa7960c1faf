#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/access/access_policy.h"
#include "daemon/access/peer_limits.h"
#include "daemon/catalog/catalog.h"
#include "daemon/query/query_spans.h"
#include "daemon/query/range_row_cache.h"
#include "daemon/query/rank_reader.h"
#include "daemon/query/reader_pool.h"
#include "daemon/query/spooled_records.h"
#include "daemon/report/report_builder.h"
#include "daemon/retention/job_pruner.h"
#include "flopscope/v1/query.grpc.pb.h"

namespace flopscope::daemon {

// Answers the client: job and rank listings from the catalog, reports from each rank file's
// module_stats and small tables (ReportBuilder), never by scanning raw kernels.
// Errors: INVALID_ARGUMENT for a malformed job id or step window; NOT_FOUND "job 'x' not found"
// and "job 'x' has no rank 3 (ranks: 0-1)".
//
// GetRankReports answers `flopscope ranks` in one call: the catalog is listed once and every
// rank file read once, each rank's report streamed as soon as it is built (memory stays that of
// a few ranks however many there are). Every report reads its ranks' files on a few threads in
// parallel (ReadInOrder) and keeps the read connections for the next one (ReaderPool).
//
// Thread-safe: the Catalog and the ReaderPool are, and a report has its connections to itself.
class QueryService final : public v1::Query::Service {
 public:
  // `range_cache_bytes`: memory for the rank files' range events between reports
  // (RangeRowCache; flopscoped --report-cache-mb).
  QueryService(std::string data_dir, Catalog* catalog,
               size_t range_cache_bytes = kDefaultRangeCacheBytes)
      : data_dir_(std::move(data_dir)), catalog_(catalog), range_rows_(range_cache_bytes) {}

  static constexpr size_t kDefaultRangeCacheBytes = size_t{512} << 20;

  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ListRanks(grpc::ServerContext* context, const v1::ListRanksRequest* request,
                         v1::ListRanksResponse* response) override;
  grpc::Status GetReport(grpc::ServerContext* context, const v1::ReportRequest* request,
                         v1::Report* response) override;
  grpc::Status GetRankReports(grpc::ServerContext* context, const v1::ReportRequest* request,
                              grpc::ServerWriter<v1::RankReport>* writer) override;
  // `flopscope export`: implemented in daemon/query/query_trace.cc (rank files read by
  // trace_reader).
  grpc::Status GetTrace(grpc::ServerContext* context, const v1::TraceRequest* request,
                        grpc::ServerWriter<v1::TraceChunk>* writer) override;

  // `flopscope where`: implemented in daemon/query/query_where.cc (rank files read by
  // open_ranges_reader).
  grpc::Status GetOpenRanges(grpc::ServerContext* context, const v1::OpenRangesRequest* request,
                             v1::OpenRangesResponse* response) override;
  // The same for callers in the same process (tests): every rank of the job, its latest
  // snapshot, whether it is connected; `now_ns` the clock the answer is stamped with.
  absl::StatusOr<v1::OpenRangesResponse> BuildOpenRanges(const std::string& job_id, int64_t now_ns);

  // `flopscope prune`: implemented in daemon/query/query_prune.cc (the pruner deletes).
  // UNIMPLEMENTED without a pruner.
  grpc::Status PruneJobs(grpc::ServerContext* context, const v1::PruneRequest* request,
                         v1::PruneResponse* response) override;
  // The job deleter PruneJobs uses (daemon/retention/job_pruner.h); set before serving.
  void SetPruner(JobPruner* pruner) { pruner_ = pruner; }
  // Closes the idle read connections to files under `directory` (a pruned job's).
  void DropReaders(const std::string& directory) {
    readers_.DropUnder(directory);
    range_rows_.DropUnder(directory);
  }
  // The prune itself, for callers in the same process (tests): as PruneJobs for `caller`.
  absl::StatusOr<v1::PruneResponse> Prune(const PeerIdentity& caller,
                                          const v1::PruneRequest& request);

  // Who may read which job (daemon/access/access_policy.h; required: set before serving). Every RPC
  // checks it first; ListJobs lists only the jobs the caller may read.
  void SetAccessControl(const AccessControl* access) { access_ = access; }
  // How many queries one user may have in flight (peer_limits.h); set before serving, may stay
  // null (no limit).
  void SetLimits(PeerLimits* limits) { limits_ = limits; }
  // Where the records waiting in spool files are counted (spooled_records.h): listings and
  // reports say they wait instead of counting them lost. Set before serving; may stay null.
  void SetSpooledRecords(SpooledRecordsSource source) { spooled_ = std::move(source); }

  // Opens a read connection to the rank's file ahead of its first report (ReaderPool::Warm).
  // Best effort: a failure here is the first report's to say.
  void PrepareReader(const std::string& job_id, int32_t rank);

  // Opens read connections to the rank files of the most recently seen jobs first, until the
  // pool is full, every file is open or `stop` is set; returns how many files it opened. Run on
  // a background thread at start, so that the first `flopscope ranks` after a restart does not
  // pay for every file's cold open (its WAL index is rebuilt: about 1 ms a file).
  size_t WarmRecentJobs(const std::atomic<bool>& stop);
  // Read connections kept open between reports.
  size_t idle_readers() { return readers_.idle(); }
  // The range events kept between reports (tests).
  RangeRowCache& range_rows() { return range_rows_; }

  // The report itself, for callers in the same process (tests, bench). `spans`, when given, gets
  // the report's phases (catalog, read+add, build).
  absl::StatusOr<v1::Report> BuildReport(const v1::ReportRequest& request,
                                         QuerySpans* spans = nullptr);
  // The report of each rank `request` names (all when none), in rank order, handed to `emit`;
  // stops early when `emit` returns false (the client went away).
  absl::Status ForEachRankReport(const v1::ReportRequest& request,
                                 const std::function<bool(v1::RankReport)>& emit,
                                 QuerySpans* spans = nullptr);
  // The raw trace of the ranks and steps `request` names, rank after rank, handed to `emit`
  // chunk by chunk; stops early (CANCELLED) when `emit` returns false.
  absl::Status ForEachTraceChunk(const v1::TraceRequest& request,
                                 const std::function<bool(v1::TraceChunk)>& emit);

 private:
  // The caller's place among its queries in flight, held until the handler returns: null for a
  // caller with no identity (the handler's access check refuses it) or without limits;
  // RESOURCE_EXHAUSTED beyond --max-queries-per-uid.
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> AdmitQuery(
      const grpc::ServerContext& context) const;
  // The job's ranks, or the error for an unknown or malformed job id.
  absl::StatusOr<std::vector<v1::RankInfo>> RanksOf(const std::string& job_id);
  // The ranks `request` names (all when none), or NOT_FOUND naming the one the job lacks.
  absl::StatusOr<std::vector<v1::RankInfo>> WantedRanks(const v1::ReportRequest& request);
  // Thread-safe: ReadRanks calls it from several threads.
  absl::StatusOr<RankSnapshot> ReadRank(const std::string& job_id, int32_t rank,
                                        const RankReadOptions& options);
  // Reads the ranks' files in parallel (ReadInOrder), handing each snapshot to `consume` in
  // order on this thread; `consume` returning false stops the reading.
  void ReadRanks(const std::string& job_id, const std::vector<v1::RankInfo>& ranks,
                 const RankReadOptions& options,
                 const std::function<bool(size_t, absl::StatusOr<RankSnapshot>)>& consume,
                 QuerySpans* spans);

  const std::string data_dir_;
  Catalog* catalog_;
  const AccessControl* access_ = nullptr;
  PeerLimits* limits_ = nullptr;
  JobPruner* pruner_ = nullptr;
  SpooledRecordsSource spooled_;
  ReaderPool readers_{ReaderPool::CapacityForFileLimit()};
  RangeRowCache range_rows_;
};

// "0-3,5,7-8" for ranks {0,1,2,3,5,7,8} (sorted, duplicates ignored).
std::string FormatRankList(std::vector<int32_t> ranks);

// The step window of a report request ("--steps 3:7": first 3, last 7); nullopt for the whole
// run; INVALID_ARGUMENT for a negative first step or a last step before the first.
absl::StatusOr<std::optional<StepWindowRequest>> StepWindowOf(const v1::ReportRequest& request);

// After every rank was added: INVALID_ARGUMENT when a requested window holds no step of any rank
// (no step marked, or a window past the last step), naming what the ranks have.
absl::Status CheckStepWindow(const v1::ReportRequest& request, const StepRollup& steps);

}  // namespace flopscope::daemon
