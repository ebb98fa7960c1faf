// Which jobs a disk budget deletes, and what a job's files take (disk_budget.h).
#include "daemon/retention/disk_budget.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text) {
  const auto invalid = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--max-disk '", text.substr(0, 64), "': ", why,
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
