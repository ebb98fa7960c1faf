// Query.PruneJobs (`flopscope prune`): which jobs a caller's request names, checked, then
// deleted by the JobPruner. The client never touches a file.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job_id.h"
#include "daemon/base/grpc_status.h"
#include "daemon/query/query_service.h"

namespace flopscope::daemon {
namespace {

const JobOnDisk* Find(const std::vector<JobOnDisk>& jobs, const std::string& job_id) {
  for (const JobOnDisk& job : jobs) {
    if (job.usage.job_id == job_id) return &job;
  }
  return nullptr;
}

absl::Status RunningError(const JobOnDisk& job) {
  return absl::FailedPreconditionError(
      absl::StrCat("job '", job.usage.job_id, "' is running (", job.info.connected_sessions(),
                   " stream(s) connected): prune it once it has ended"));
}

// The jobs `request` names, each checked (id, access, held, not running) before any goes.
absl::Status ChooseNamed(const AccessControl& access, const PeerIdentity& caller,
                         const v1::PruneRequest& request, const std::vector<JobOnDisk>& jobs,
                         std::vector<const JobOnDisk*>* chosen) {
  for (const std::string& job_id : request.job_ids()) {
    if (std::string problem = JobIdProblem(job_id); !problem.empty()) {
      return absl::InvalidArgumentError(problem);
    }
    if (absl::Status s = access.CheckJobAccess(caller, job_id, Access::kPrune); !s.ok()) return s;
    const JobOnDisk* job = Find(jobs, job_id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
    if (job->usage.running) return RunningError(*job);
    if (std::find(chosen->begin(), chosen->end(), job) == chosen->end()) chosen->push_back(job);
  }
  return absl::OkStatus();
}

// The jobs the caller may prune last seen before now - older_than; running ones are kept and
// listed.
absl::Status ChooseOlder(const AccessControl& access, const PeerIdentity& caller,
                         const v1::PruneRequest& request, const std::vector<JobOnDisk>& jobs,
                         std::vector<const JobOnDisk*>* chosen, v1::PruneResponse* response) {
  std::vector<v1::JobInfo> infos;
  for (const JobOnDisk& job : jobs) infos.push_back(job.info);
  if (absl::Status s = access.FilterReadable(caller, &infos); !s.ok()) return s;
  absl::flat_hash_set<std::string> allowed;
  for (const v1::JobInfo& info : infos) allowed.insert(info.job_id());
  const int64_t cutoff_ns = absl::GetCurrentTimeNanos() - request.older_than_ns();
  for (const JobOnDisk& job : jobs) {
    if (!allowed.contains(job.usage.job_id) || job.usage.last_seen_ns >= cutoff_ns) continue;
    if (job.usage.running) {
      response->add_kept_running(job.usage.job_id);
    } else {
      chosen->push_back(&job);
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status QueryService::PruneJobs(grpc::ServerContext* context, const v1::PruneRequest* request,
                                     v1::PruneResponse* response) {
  absl::StatusOr<PeerIdentity> caller = access_->Identify(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<std::unique_ptr<PeerLimits::Slot>> slot = AdmitQuery(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  absl::StatusOr<v1::PruneResponse> answer = Prune(*caller, *request);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

absl::StatusOr<v1::PruneResponse> QueryService::Prune(const PeerIdentity& caller,
                                                      const v1::PruneRequest& request) {
  if (pruner_ == nullptr) return absl::UnimplementedError("this daemon does not prune jobs");
  const bool named = !request.job_ids().empty();
  if (named == (request.older_than_ns() > 0) || request.older_than_ns() < 0) {
    return absl::InvalidArgumentError(
        "name the jobs to prune, or give a positive --older-than, not both");
  }
  absl::StatusOr<std::vector<JobOnDisk>> jobs = pruner_->Jobs();
  if (!jobs.ok()) return jobs.status();
  v1::PruneResponse response;
  std::vector<const JobOnDisk*> chosen;
  const absl::Status choice =
      named ? ChooseNamed(*access_, caller, request, *jobs, &chosen)
            : ChooseOlder(*access_, caller, request, *jobs, &chosen, &response);
  if (!choice.ok()) return choice;
  const std::string why = absl::StrCat("flopscope prune by ", DescribePeer(caller));
  for (const JobOnDisk* job : chosen) {
    uint64_t bytes = job->usage.bytes;
    if (!request.dry_run()) {
      absl::StatusOr<uint64_t> freed = pruner_->Prune(job->usage.job_id, why);
      if (!freed.ok()) {
        return absl::Status(freed.status().code(),
                            absl::StrCat(freed.status().message(), " (", response.jobs_size(),
                                         " job(s) before it were pruned)"));
      }
      bytes = *freed;
    }
    v1::PrunedJob& out = *response.add_jobs();
    out.set_job_id(job->usage.job_id);
    out.set_bytes(bytes);
    out.set_last_seen_ns(job->usage.last_seen_ns);
    out.set_ranks(job->info.ranks());
    response.set_bytes(response.bytes() + bytes);
  }
  return response;
}

}  // namespace flopscope::daemon
