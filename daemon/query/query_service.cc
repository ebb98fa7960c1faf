#include "daemon/query/query_service.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_id.h"
#include "daemon/base/grpc_status.h"
#include "daemon/base/logger.h"
#include "daemon/query/ordered_reads.h"
#include "daemon/query/query_spans.h"
#include "daemon/query/rank_reader.h"
#include "daemon/report/report_builder.h"
#include "daemon/store/damaged_files.h"
#include "daemon/store/left_alone_files.h"

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

absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> QueryService::AdmitQuery(
    const grpc::ServerContext& context) const {
  if (limits_ == nullptr) return nullptr;
  absl::StatusOr<PeerIdentity> caller = access_->Identify(context);
  if (!caller.ok()) return nullptr;
  return limits_->AdmitQuery(*caller);
}

grpc::Status QueryService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                                    v1::ListJobsResponse* response) {
  QuerySpans spans("ListJobs", "");
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  // Only the jobs the caller may read; a caller with no identity (plain TCP) sees none.
  absl::StatusOr<PeerIdentity> caller = access_->Identify(*context);
  if (!caller.ok()) return grpc::Status::OK;
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  spans.End("catalog");
  if (absl::Status s = access_->FilterReadable(*caller, &*jobs); !s.ok()) return ToGrpcStatus(s);
  spans.End("access");
  const SpooledRecords spooled = spooled_ ? spooled_() : SpooledRecords();
  for (v1::JobInfo& job : *jobs) {
    if (const auto waiting = spooled.find(job.job_id()); waiting != spooled.end()) {
      // Rare (a spool waits for the collector's next pass): the ranks' losses say what moves.
      absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job.job_id());
      if (ranks.ok()) {
        const SpooledTotals totals = MoveSpooledOutOfLosses(waiting->second, &*ranks);
        job.set_spooled_records(totals.waiting);
        job.set_lost_records(job.lost_records() - std::min(totals.moved, job.lost_records()));
      }
    }
    *response->add_jobs() = std::move(job);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ListRanks(grpc::ServerContext* context,
                                     const v1::ListRanksRequest* request,
                                     v1::ListRanksResponse* response) {
  QuerySpans spans("ListRanks", request->job_id());
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (absl::Status s = access_->CheckJobAccess(*context, request->job_id(), Access::kRead);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  spans.End("access");
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = RanksOf(request->job_id());
  spans.End("catalog");
  if (!ranks.ok()) return ToGrpcStatus(ranks.status());
  for (v1::RankInfo& rank : *ranks) *response->add_ranks() = std::move(rank);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetReport(grpc::ServerContext* context, const v1::ReportRequest* request,
                                     v1::Report* response) {
  QuerySpans spans("GetReport", request->job_id());
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (absl::Status s = access_->CheckJobAccess(*context, request->job_id(), Access::kRead);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  spans.End("access");
  absl::StatusOr<v1::Report> report = BuildReport(*request, &spans);
  if (!report.ok()) {
    LogDebug("report for job '", request->job_id(), "': ", report.status().message());
    return ToGrpcStatus(report.status());
  }
  *response = *std::move(report);
  MoveSpooledOutOfLosses(response);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetRankReports(grpc::ServerContext* context,
                                          const v1::ReportRequest* request,
                                          grpc::ServerWriter<v1::RankReport>* writer) {
  QuerySpans spans("GetRankReports", request->job_id());
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (absl::Status s = access_->CheckJobAccess(*context, request->job_id(), Access::kRead);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  spans.End("access");
  absl::Status status = ForEachRankReport(
      *request,
      [&](v1::RankReport report) {
        if (report.has_report()) MoveSpooledOutOfLosses(report.mutable_report());
        // A cancelled call (the client gave up) stops the reading too.
        return !context->IsCancelled() && writer->Write(report);
      },
      &spans);
  if (!status.ok()) {
    LogDebug("rank reports for job '", request->job_id(), "': ", status.message());
  }
  return ToGrpcStatus(status);
}

absl::StatusOr<std::vector<v1::RankInfo>> QueryService::RanksOf(const std::string& job_id) {
  if (std::string problem = JobIdProblem(job_id); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job_id);
  if (ranks.ok() && ranks->empty()) {
    return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  }
  const SpooledRecords spooled = spooled_ ? spooled_() : SpooledRecords();
  if (const auto waiting = spooled.find(job_id); ranks.ok() && waiting != spooled.end()) {
    MoveSpooledOutOfLosses(waiting->second, &*ranks);
  }
  return ranks;
}

absl::StatusOr<std::vector<v1::RankInfo>> QueryService::WantedRanks(
    const v1::ReportRequest& request) {
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = RanksOf(request.job_id());
  if (!ranks.ok() || request.ranks().empty()) return ranks;
  const std::set<int32_t> wanted(request.ranks().begin(), request.ranks().end());
  std::vector<int32_t> known;
  std::vector<v1::RankInfo> chosen;
  for (v1::RankInfo& rank : *ranks) {
    known.push_back(rank.rank());
    if (wanted.contains(rank.rank())) chosen.push_back(std::move(rank));
  }
  for (int32_t rank : wanted) {
    if (std::find(known.begin(), known.end(), rank) == known.end()) {
      return absl::NotFoundError(absl::StrCat("job '", request.job_id(), "' has no rank ", rank,
                                              " (ranks: ", FormatRankList(known), ")"));
    }
  }
  return chosen;
}

size_t QueryService::WarmRecentJobs(const std::atomic<bool>& stop) {
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
  if (!jobs.ok()) return 0;
  std::sort(jobs->begin(), jobs->end(), [](const v1::JobInfo& a, const v1::JobInfo& b) {
    return a.last_seen_ns() > b.last_seen_ns();
  });
  size_t opened = 0;
  for (const v1::JobInfo& job : *jobs) {
    absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job.job_id());
    if (!ranks.ok()) continue;
    for (const v1::RankInfo& rank : *ranks) {
      if (stop.load(std::memory_order_relaxed) || readers_.full()) return opened;
      absl::StatusOr<RankFile> file = RankFileForReading(data_dir_, job.job_id(), rank.rank());
      if (file.ok() && readers_.Warm(file->path).ok()) ++opened;
    }
  }
  return opened;
}

void QueryService::PrepareReader(const std::string& job_id, int32_t rank) {
  absl::StatusOr<RankFile> file = RankFileForReading(data_dir_, job_id, rank);
  if (file.ok()) readers_.Warm(file->path).IgnoreError();
}

absl::StatusOr<RankSnapshot> QueryService::ReadRank(const std::string& job_id, int32_t rank,
                                                    const RankReadOptions& options) {
  // Lock hazard avoided: the pooled connection is this query's own, so the rank's RankStore and
  // its mutex (held across each batch's commit and a fold's ~0.4 s) are never touched; WAL lets
  // the read run beside the writer and see its last commit.
  // The usual file, or the one beside it when the usual one was left alone (left_alone_files.h).
  const absl::StatusOr<RankFile> file = RankFileForReading(data_dir_, job_id, rank);
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      file.ok() ? readers_.Take(file->path) : file.status();
  // Lock hazard: the lease holds this file's entry of the range cache until the read is done;
  // another report reading the same rank waits for it (never for a stream: the cache is the
  // readers' alone).
  RangeRowCache::Lease cached = file.ok() ? range_rows_.Take(file->path) : RangeRowCache::Lease();
  absl::StatusOr<RankSnapshot> snapshot = db.ok() ? RankReader::Read(**db, options, cached.rows())
                                                  : absl::StatusOr<RankSnapshot>(db.status());
  if (snapshot.ok()) {
    readers_.GiveBack(*std::move(db));
    snapshot->left_alone = file->note;
  }
  if (!snapshot.ok()) {
    // A file found damaged at start was moved aside (damaged_files.h): say so, by name.
    const std::string moved = file.ok() ? DamagedCopyOf(file->path) : "";
    const std::string where =
        moved.empty() ? "" : absl::StrCat(" (its damaged file was moved aside to ", moved, ")");
    return absl::Status(
        snapshot.status().code(),
        absl::StrCat("job '", job_id, "' rank ", rank, ": ", snapshot.status().message(), where));
  }
  return snapshot;
}

void QueryService::ReadRanks(
    const std::string& job_id, const std::vector<v1::RankInfo>& ranks,
    const RankReadOptions& options,
    const std::function<bool(size_t, absl::StatusOr<RankSnapshot>)>& consume, QuerySpans* spans) {
  const size_t threads = ReportReadThreads();
  std::atomic<int64_t> read_us{0};  // the reads' own wall time, summed over the threads
  int64_t consume_us = 0;           // `consume`'s, on this thread
  ReadInOrder(
      ranks.size(), threads, 2 * threads,
      [&](size_t index) {
        const absl::Time started = absl::Now();
        absl::StatusOr<RankSnapshot> snapshot = ReadRank(job_id, ranks[index].rank(), options);
        read_us.fetch_add(absl::ToInt64Microseconds(absl::Now() - started),
                          std::memory_order_relaxed);
        return snapshot;
      },
      [&](size_t index, absl::StatusOr<RankSnapshot> snapshot) {
        const absl::Time started = absl::Now();
        const bool more = consume(index, std::move(snapshot));
        consume_us += absl::ToInt64Microseconds(absl::Now() - started);
        return more;
      });
  if (spans != nullptr) {
    spans->End("read+add");
    spans->Note("ranks", static_cast<int64_t>(ranks.size()));
    spans->Note("summed_read_us", read_us.load(std::memory_order_relaxed));
    // Building each rank's part and, for GetRankReports, writing it to the client (a client
    // slow to read holds the Write).
    spans->Note("add_us", consume_us);
  }
}

absl::StatusOr<v1::Report> QueryService::BuildReport(const v1::ReportRequest& request,
                                                     QuerySpans* spans) {
  absl::StatusOr<std::optional<StepWindowRequest>> window = StepWindowOf(request);
  if (!window.ok()) return window.status();
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = WantedRanks(request);
  if (!ranks.ok()) return ranks.status();
  if (spans != nullptr) spans->End("catalog");
  ReportBuilder builder(request.job_id());
  if (request.omit_step_times()) builder.OmitStepTimes();
  builder.ExpectRanks(ranks->size());
  RankReadOptions read_options;
  read_options.step_window = *window;
  if (!request.kernels_of().empty()) {
    builder.ListTopKernels(request.kernels_of(), request.top_kernels());
    read_options.kernel_groups = true;
  }
  // An unreadable rank is left out and named; only when every wanted rank is, the report fails.
  std::vector<v1::UnreadableRank> unreadable;
  std::vector<v1::UnreadableRank> left_alone;  // read from beside a file left alone: named
  absl::Status failure;
  ReadRanks(
      request.job_id(), *ranks, read_options,
      [&](size_t index, absl::StatusOr<RankSnapshot> snapshot) {
        if (!snapshot.ok()) {
          failure = snapshot.status();
          v1::UnreadableRank& left_out = unreadable.emplace_back();
          left_out.set_rank((*ranks)[index].rank());
          left_out.set_problem(std::string(failure.message()));
          return true;
        }
        builder.AddRank((*ranks)[index], *snapshot);
        if (!snapshot->left_alone.empty()) {
          v1::UnreadableRank& note = left_alone.emplace_back();
          note.set_rank((*ranks)[index].rank());
          note.set_problem(snapshot->left_alone);
        }
        return true;
      },
      spans);
  if (unreadable.size() == ranks->size() && !failure.ok()) return failure;
  if (!request.kernels_of().empty() && !builder.KnowsTopKernelsPath()) {
    return absl::NotFoundError(absl::StrCat("job '", request.job_id(), "' has no module '",
                                            request.kernels_of(),
                                            "' (use a path the report prints, or / for all)"));
  }
  if (absl::Status s = CheckStepWindow(request, builder.step_rollup()); !s.ok()) return s;
  v1::Report report = builder.Build();
  for (v1::UnreadableRank& left_out : unreadable) {
    *report.add_unreadable_ranks() = std::move(left_out);
  }
  for (v1::UnreadableRank& note : left_alone) *report.add_left_alone_files() = std::move(note);
  if (spans != nullptr) spans->End("build");
  return report;
}

absl::Status QueryService::ForEachRankReport(const v1::ReportRequest& request,
                                             const std::function<bool(v1::RankReport)>& emit,
                                             QuerySpans* spans) {
  absl::StatusOr<std::optional<StepWindowRequest>> window = StepWindowOf(request);
  if (!window.ok()) return window.status();
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = WantedRanks(request);
  if (!ranks.ok()) return ranks.status();
  if (spans != nullptr) spans->End("catalog");
  RankReadOptions read_options;
  read_options.step_window = *window;
  bool stopped = false;
  ReadRanks(
      request.job_id(), *ranks, read_options,
      [&](size_t index, absl::StatusOr<RankSnapshot> snapshot) {
        const v1::RankInfo& rank = (*ranks)[index];
        v1::RankReport answer;
        answer.set_rank(rank.rank());
        *answer.mutable_info() = rank;
        ReportBuilder builder(request.job_id());
        if (request.omit_step_times()) builder.OmitStepTimes();
        if (snapshot.ok()) builder.AddRank(rank, *snapshot);
        absl::Status problem =
            snapshot.ok() ? CheckStepWindow(request, builder.step_rollup()) : snapshot.status();
        if (problem.ok()) {
          *answer.mutable_report() = builder.Build();
          if (!snapshot->left_alone.empty()) {
            v1::UnreadableRank* note = answer.mutable_report()->add_left_alone_files();
            note->set_rank(rank.rank());
            note->set_problem(snapshot->left_alone);
          }
        } else {
          // One unreadable rank loses its own figures, not the listing of the others.
          answer.set_problem(std::string(problem.message()));
        }
        stopped = !emit(std::move(answer));
        return !stopped;
      },
      spans);
  if (stopped) return absl::CancelledError("the client stopped reading");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<StepWindowRequest>> StepWindowOf(const v1::ReportRequest& request) {
  if (!request.has_first_step() && !request.has_last_step()) return std::nullopt;
  StepWindowRequest window;
  window.first = request.has_first_step() ? request.first_step() : 0;
  if (request.has_last_step()) window.last = request.last_step();
  if (window.first < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step window: steps are numbered from 0, not ", window.first));
  }
  if (window.last && *window.last < window.first) {
    return absl::InvalidArgumentError(
        absl::StrCat("step window ", window.first, ":", *window.last, " ends before it starts"));
  }
  return window;
}

absl::Status CheckStepWindow(const v1::ReportRequest& request, const StepRollup& steps) {
  if (!steps.window_requested() || steps.steps_in_window() > 0) return absl::OkStatus();
  if (steps.steps_marked() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", request.job_id(),
        "' marks no steps (the range `step` in the flopscope NVTX domain), so a step window "
        "selects nothing"));
  }
  const std::string window = absl::StrCat(
      request.first_step(), ":", request.has_last_step() ? absl::StrCat(request.last_step()) : "");
  if (!steps.unfinished_steps().empty()) {
    // Its only steps did not finish: no figures for them, rather than none said.
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", request.job_id(), "': steps ", window, " hold only steps that did not finish (",
        absl::StrJoin(steps.unfinished_steps(), ", "),
        ": the session ended inside the step, a crash or an exit mid-step), so there are no "
        "figures for them"));
  }
  return absl::InvalidArgumentError(absl::StrCat("job '", request.job_id(), "': steps ", window,
                                                 " are past the last step (its ranks have steps "
                                                 "0-",
                                                 steps.steps_marked() - 1, ")"));
}

}  // namespace flopscope::daemon
