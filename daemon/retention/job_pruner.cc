// Deleting whole jobs: one prune, the recovery of interrupted ones, the budget's pass
// (job_pruner.h).
#include "daemon/retention/job_pruner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job_id.h"
#include "common/utf8.h"
#include "daemon/base/cpu_priority.h"
#include "daemon/base/logger.h"
#include "daemon/store/data_layout.h"

namespace flopscope::daemon {
namespace {

namespace fs = std::filesystem;

constexpr char kTombstonePrefix[] = ".pruning-";

// Makes a rename inside `dir` durable (best effort: a failure leaves only a window in which a
// crash undoes the rename, which is harmless: nothing was deleted yet).
void SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);  // see above: best effort
  close(fd);
}

// Removes `path` and everything under it; a missing path is no error.
absl::Status RemoveTree(const std::string& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (!error) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", error.message(),
                                          " (check that flopscoped may write its data directory)"));
}

}  // namespace

std::string PruneTombstone(absl::string_view data_dir, absl::string_view job_id) {
  return absl::StrCat(data_dir, "/jobs/", kTombstonePrefix, job_id);
}

JobPruner::JobPruner(std::string data_dir, Catalog* catalog, StoreRegistry* stores,
                     DropReaders drop)
    : data_dir_(std::move(data_dir)),
      catalog_(catalog),
      stores_(stores),
      drop_readers_(std::move(drop)) {}

JobPruner::~JobPruner() {
  {
    absl::MutexLock lock(&mu_);  // guards stopping_
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::vector<JobOnDisk>> JobPruner::Jobs() {
  absl::StatusOr<std::vector<v1::JobInfo>> jobs = catalog_->ListJobs();
  if (!jobs.ok()) return jobs.status();
  // Jobs listed before owners were recorded belong to the daemon's own uid (catalog.h).
  absl::StatusOr<absl::flat_hash_map<std::string, uint32_t>> owners =
      catalog_->JobOwners(geteuid());
  if (!owners.ok()) return owners.status();
  const absl::flat_hash_set<std::string> open = stores_->OpenJobs();
  std::vector<JobOnDisk> out;
  out.reserve(jobs->size());
  for (v1::JobInfo& info : *jobs) {
    absl::StatusOr<uint64_t> bytes = JobBytes(JobDirectory(data_dir_, info.job_id()));
    if (!bytes.ok()) return bytes.status();
    JobOnDisk& job = out.emplace_back();
    job.usage.job_id = info.job_id();
    job.usage.last_seen_ns = info.last_seen_ns();
    job.usage.bytes = *bytes;
    job.usage.running = info.connected_sessions() > 0 || open.contains(info.job_id());
    if (auto it = owners->find(info.job_id()); it != owners->end()) job.usage.owner = it->second;
    job.info = std::move(info);
  }
  return out;
}

absl::StatusOr<uint64_t> JobPruner::Prune(const std::string& job_id, absl::string_view why) {
  if (std::string problem = JobIdProblem(job_id); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  absl::StatusOr<std::vector<v1::RankInfo>> ranks = catalog_->ListRanks(job_id);
  if (!ranks.ok()) return ranks.status();
  if (ranks->empty()) return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  if (absl::Status s = stores_->BeginPrune(job_id); !s.ok()) return s;
  // Behind the fence no stream can connect, so a rank counted connected now really is.
  ranks = catalog_->ListRanks(job_id);
  absl::Status status = ranks.status();
  if (status.ok() && ranks->empty()) {
    status = absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  }
  for (size_t i = 0; status.ok() && i < ranks->size(); ++i) {
    if ((*ranks)[i].connected()) {
      status = absl::FailedPreconditionError(
          absl::StrCat("job '", job_id, "' is running (rank ", (*ranks)[i].rank(),
                       " is connected): prune it once it has ended"));
    }
  }
  absl::StatusOr<uint64_t> bytes =
      status.ok() ? JobBytes(JobDirectory(data_dir_, job_id)) : absl::StatusOr<uint64_t>(status);
  if (bytes.ok()) status = DeleteFenced(job_id);
  stores_->EndPrune(job_id);
  if (!bytes.ok()) return bytes.status();
  if (!status.ok()) return status;
  // Job ids passed JobIdProblem; printable anyway, in case a rule ever widens.
  LogInfo("pruned job '", PrintableForTerminal(job_id), "': ", ranks->size(), " rank(s), ", *bytes,
          " bytes (", why, ")");
  Count(*bytes);
  return *bytes;
}

absl::Status JobPruner::DeleteFenced(const std::string& job_id) {
  const std::string dir = JobDirectory(data_dir_, job_id);
  const std::string tombstone = PruneTombstone(data_dir_, job_id);
  // A tombstone left by an interrupted prune of an earlier job of this name goes first.
  if (absl::Status s = RemoveTree(tombstone); !s.ok()) return s;
  std::error_code error;
  fs::rename(dir, tombstone, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::InternalError(absl::StrCat("cannot move ", dir, " aside: ", error.message()));
  }
  SyncDirectory(absl::StrCat(data_dir_, "/jobs"));
  if (absl::Status s = catalog_->DeleteJob(job_id); !s.ok()) return s;  // the next start retries
  if (drop_readers_) {
    drop_readers_(dir);
    drop_readers_(tombstone);
  }
  return RemoveTree(tombstone);
}

size_t JobPruner::RecoverInterrupted() {
  std::error_code error;
  size_t finished = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(data_dir_) / "jobs", error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, kTombstonePrefix)) continue;
    const std::string job_id = name.substr(sizeof(kTombstonePrefix) - 1);
    if (!JobIdProblem(job_id).empty()) continue;  // not a name this pruner writes
    absl::Status s = catalog_->DeleteJob(job_id);
    if (s.ok()) s = RemoveTree(entry.path().string());
    if (!s.ok()) {
      LogWarning("interrupted prune of job '", job_id, "' not finished: ", s.message());
      continue;
    }
    LogInfo("finished the interrupted prune of job '", job_id, "'");
    ++finished;
  }
  return finished;
}

BudgetPass JobPruner::EnforceBudget(const BudgetPolicy& policy) {
  BudgetPass pass;
  // Ends a full disk kept from the catalog (catalog.h): a job that ended must not count as
  // running here.
  if (absl::Status s = catalog_->RetryPendingWrites(); !s.ok()) {
    LogWarning("disk budget: ", s.message());
  }
  absl::StatusOr<std::vector<JobOnDisk>> jobs = Jobs();
  if (!jobs.ok()) {
    LogWarning("disk budget: cannot measure the jobs: ", jobs.status().message());
    return pass;
  }
  std::vector<JobUsage> usage;
  for (const JobOnDisk& job : *jobs) {
    usage.push_back(job.usage);
    pass.bytes_before += job.usage.bytes;
  }
  pass.bytes_after = pass.bytes_before;
  const PrunePlan plan = PlanPrune(usage, policy, absl::GetCurrentTimeNanos());
  const std::string why =
      absl::StrCat("over --max-disk ", policy.max_bytes, " bytes, the largest share first");
  for (const std::string& job_id : plan.doomed) {
    absl::StatusOr<uint64_t> freed = Prune(job_id, why);
    if (!freed.ok()) {  // it started meanwhile, or the disk refused: the next pass tries again
      LogWarning("disk budget: job '", PrintableForTerminal(job_id),
                 "' not pruned: ", freed.status().message());
      continue;
    }
    pass.pruned.push_back(job_id);
    pass.bytes_after -= std::min(pass.bytes_after, *freed);
  }
  Refuse(plan);
  for (const auto& [uid, reason] : plan.refused) pass.refused.push_back(uid);
  std::sort(pass.refused.begin(), pass.refused.end());
  if (policy.max_bytes == 0 || pass.bytes_after <= policy.max_bytes) return pass;
  pass.only_running_left = std::all_of(usage.begin(), usage.end(), [&](const JobUsage& job) {
    return job.running || absl::c_linear_search(pass.pruned, job.job_id);
  });
  LogOver(pass, policy, usage);
  return pass;
}

void JobPruner::LogOver(const BudgetPass& pass, const BudgetPolicy& policy,
                        const std::vector<JobUsage>& usage) {
  if (pass.only_running_left) {
    LogWarning("disk budget: the jobs take ", pass.bytes_after, " bytes, over --max-disk ",
               policy.max_bytes,
               ", and every job left is running: nothing of theirs is deleted (their "
               "old steps are folded: --keep-raw-steps)");
    return;
  }
  const size_t kept =
      static_cast<size_t>(std::count_if(usage.begin(), usage.end(), [&](const JobUsage& job) {
        return !job.running && !absl::c_linear_search(pass.pruned, job.job_id);
      }));
  LogWarning("disk budget: the jobs take ", pass.bytes_after, " bytes, over --max-disk ",
             policy.max_bytes, "; ", kept,
             " finished job(s) kept: within their owner's share, ended less than "
             "--prune-grace-s ago, or not pruned (above)");
}

void JobPruner::Refuse(const PrunePlan& plan) {
  refused_.Set(plan.refused);
  absl::flat_hash_map<uint32_t, std::string> before;
  {
    absl::MutexLock lock(&mu_);  // guards refused_logged_; logged after it is let go
    before = std::exchange(refused_logged_, plan.refused);
  }
  for (const auto& [uid, reason] : plan.refused) {
    if (!before.contains(uid))
      LogWarning("disk budget: refusing new records of uid ", uid, ": ", reason);
  }
  for (const auto& [uid, reason] : before) {
    if (!plan.refused.contains(uid)) LogInfo("disk budget: uid ", uid, " is stored again");
  }
}

absl::Status JobPruner::CheckWriter(absl::string_view job_id) {
  if (refused_.empty()) return absl::OkStatus();
  absl::StatusOr<std::optional<uint32_t>> owner = catalog_->JobOwner(job_id, geteuid());
  if (!owner.ok() || !owner->has_value()) return absl::OkStatus();  // no owner: nobody's share
  return refused_.Check(**owner);
}

void JobPruner::Start(const BudgetPolicy& policy, absl::Duration period) {
  thread_ = std::thread([this, policy, period] { Loop(policy, period); });
}

void JobPruner::Loop(BudgetPolicy policy, absl::Duration period) {
  const ScopedThreadNice behind_queries(kBackgroundNice);  // cpu_priority.h
  while (true) {
    EnforceBudget(policy);
    absl::MutexLock lock(&mu_);
    const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), period)) return;
  }
}

void JobPruner::Count(uint64_t bytes) {
  {
    absl::MutexLock lock(&mu_);  // guards the counters
    ++jobs_pruned_;
    bytes_pruned_ += bytes;
  }
  if (pruned_hook_) pruned_hook_(bytes);
}

uint64_t JobPruner::jobs_pruned() {
  absl::MutexLock lock(&mu_);  // guards jobs_pruned_
  return jobs_pruned_;
}

uint64_t JobPruner::bytes_pruned() {
  absl::MutexLock lock(&mu_);  // guards bytes_pruned_
  return bytes_pruned_;
}

}  // namespace flopscope::daemon
