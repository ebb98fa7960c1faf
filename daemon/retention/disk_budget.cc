// Which jobs a disk budget deletes, and what a job's files take (disk_budget.h).
#include "daemon/retention/disk_budget.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "absl/container/btree_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/store/disk_space.h"

namespace flopscope::daemon {

namespace {

// One owner's data as the plan goes: its bytes left and its deletable jobs, oldest first.
struct Holder {
  uint64_t bytes = 0;
  std::vector<const JobUsage*> deletable;
  size_t next = 0;  // deletable[next] goes next
};

using Holders = absl::btree_map<uint32_t, Holder>;  // by uid: a deterministic plan

uint64_t ShareOf(const Holders& holders, uint64_t max_bytes) {
  size_t holding = 0;
  for (const auto& [uid, holder] : holders) holding += holder.bytes > 0 ? 1 : 0;
  return holding == 0 ? max_bytes : max_bytes / holding;
}

// The user furthest over `share` that still has a job to delete; nullptr when none has.
Holder* FurthestOver(Holders& holders, uint64_t share) {
  Holder* furthest = nullptr;
  for (auto& [uid, holder] : holders) {
    if (holder.bytes <= share || holder.next == holder.deletable.size()) continue;
    if (furthest == nullptr || holder.bytes > furthest->bytes) furthest = &holder;
  }
  return furthest;
}

std::string Mib(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// Who is refused once the plan is made (PrunePlan::refused).
void RefuseOver(const Holders& holders, const BudgetPolicy& policy, uint64_t total,
                PrunePlan* plan) {
  const uint64_t share = ShareOf(holders, policy.max_bytes);
  // Refusing protects the others' data: a user alone on the node goes on (folded) as before.
  const bool shared = std::count_if(holders.begin(), holders.end(),
                                    [](const auto& holder) { return holder.second.bytes > 0; }) > 1;
  for (const auto& [uid, holder] : holders) {
    if (shared && policy.max_bytes > 0 && total > policy.max_bytes && holder.bytes > share) {
      plan->refused[uid] = absl::StrCat(
          "the jobs take ", Mib(total), ", over --max-disk ", Mib(policy.max_bytes),
          ", and this user's take ", Mib(holder.bytes), ", over its share of ", Mib(share),
          ", in jobs running or ended less than --prune-grace-s ago; its records wait until "
          "its jobs end or are pruned");
    } else if (policy.max_bytes_per_user > 0 && holder.bytes >= policy.max_bytes_per_user) {
      plan->refused[uid] =
          absl::StrCat("this user's jobs take ", Mib(holder.bytes),
                       ", at or over --max-disk-per-user ", Mib(policy.max_bytes_per_user),
                       "; its records wait until it prunes some (flopscope prune)");
    }
  }
}

}  // namespace

PrunePlan PlanPrune(std::vector<JobUsage> jobs, const BudgetPolicy& policy, int64_t now_ns) {
  std::sort(jobs.begin(), jobs.end(), [](const JobUsage& a, const JobUsage& b) {
    return std::tie(a.last_seen_ns, b.bytes, a.job_id) <
           std::tie(b.last_seen_ns, a.bytes, b.job_id);
  });
  Holders holders;
  uint64_t total = 0;
  for (const JobUsage& job : jobs) {
    Holder& holder = holders[job.owner];
    holder.bytes += job.bytes;
    total += job.bytes;
    if (!job.running && job.last_seen_ns <= now_ns - policy.grace_ns) {
      holder.deletable.push_back(&job);
    }
  }
  PrunePlan plan;
  while (policy.max_bytes > 0 && total > policy.max_bytes) {
    Holder* furthest = FurthestOver(holders, ShareOf(holders, policy.max_bytes));
    if (furthest == nullptr) break;  // what is over is running or too recent: refused below
    const JobUsage& job = *furthest->deletable[furthest->next++];
    plan.doomed.push_back(job.job_id);
    furthest->bytes -= job.bytes;
    total -= job.bytes;
  }
  RefuseOver(holders, policy, total, &plan);
  return plan;
}

void RefusedUsers::Set(absl::flat_hash_map<uint32_t, std::string> refused) {
  absl::MutexLock lock(&mu_);  // guards refused_
  refused_ = std::move(refused);
}

absl::Status RefusedUsers::Check(uint32_t uid) const {
  absl::MutexLock lock(&mu_);  // guards refused_
  auto it = refused_.find(uid);
  if (it == refused_.end()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(kDiskFullReason, " for uid ", uid, ": ", it->second));
}

bool RefusedUsers::empty() const {
  absl::MutexLock lock(&mu_);  // guards refused_
  return refused_.empty();
}

absl::StatusOr<uint64_t> JobBytes(absl::string_view job_directory) {
  namespace fs = std::filesystem;
  const fs::path dir{std::string(job_directory)};
  std::error_code error;
  if (!fs::exists(dir, error)) return 0;
  uint64_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      const uintmax_t size = it->file_size(size_error);
      if (!size_error) bytes += size;  // a file deleted meanwhile counts nothing
    }
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot measure ", job_directory, ": ", error.message(),
                     " (check that flopscoped may read its data directory)"));
  }
  return bytes;
}

absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text, absl::string_view option) {
  const auto invalid = [text, option](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(option, " '", text.substr(0, 64), "': ", why,
                                                   " (give a size such as 20G, 500M or 1.5T)"));
  };
  size_t digits = 0;
  while (digits < text.size() && (absl::ascii_isdigit(text[digits]) || text[digits] == '.')) {
    ++digits;
  }
  double number = 0;
  if (digits == 0 || !absl::SimpleAtod(text.substr(0, digits), &number)) {
    return invalid("expected a number and a unit");
  }
  std::string unit = absl::AsciiStrToUpper(text.substr(digits));
  if (absl::EndsWith(unit, "IB")) unit.erase(unit.size() - 2, 1);  // KiB -> KB
  if (unit.size() == 2 && unit[1] == 'B') unit.pop_back();         // KB -> K
  static constexpr absl::string_view kUnits = "BKMGT";
  const size_t power = unit.empty() ? 0 : kUnits.find(unit);
  if (unit.size() > 1 || power == absl::string_view::npos) {
    return invalid("the unit must be B, K, M, G or T");
  }
  const double bytes = number * std::pow(1024.0, static_cast<double>(power));
  if (!(bytes >= 1)) return invalid("a budget must be at least one byte");
  if (bytes >= 9.2e18) return invalid("more than 8 EiB");
  return static_cast<uint64_t>(bytes);
}

}  // namespace flopscope::daemon
