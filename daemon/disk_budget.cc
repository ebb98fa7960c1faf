// Which jobs a disk budget deletes, and what a job's files take (disk_budget.h).
#include "daemon/disk_budget.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {

std::vector<std::string> PlanPrune(std::vector<JobUsage> jobs, uint64_t max_bytes) {
  uint64_t total = 0;
  for (const JobUsage& job : jobs) total += job.bytes;
  std::sort(jobs.begin(), jobs.end(), [](const JobUsage& a, const JobUsage& b) {
    return std::tie(a.last_seen_ns, b.bytes, a.job_id) <
           std::tie(b.last_seen_ns, a.bytes, b.job_id);
  });
  std::vector<std::string> doomed;
  for (const JobUsage& job : jobs) {
    if (total <= max_bytes) break;
    if (job.running) continue;
    doomed.push_back(job.job_id);
    total -= job.bytes;
  }
  return doomed;
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

}  // namespace flopscope::daemon
