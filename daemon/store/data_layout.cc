#include "daemon/store/data_layout.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flopscope::daemon {

std::string CatalogPath(absl::string_view data_dir) {
  return absl::StrCat(data_dir, "/catalog.sqlite");
}

std::string JobDirectory(absl::string_view data_dir, absl::string_view job_id) {
  return absl::StrCat(data_dir, "/jobs/", job_id);
}

std::string RankFilePath(absl::string_view data_dir, absl::string_view job_id, int32_t rank) {
  return absl::StrFormat("%s/rank-%05d.sqlite", JobDirectory(data_dir, job_id), rank);
}

std::string AlternateRankFilePath(absl::string_view data_dir, absl::string_view job_id,
                                  int32_t rank) {
  return absl::StrFormat("%s/rank-%05d.alt.sqlite", JobDirectory(data_dir, job_id), rank);
}

absl::Status EnsureDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(dir, error)) return absl::OkStatus();
  fs::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create directory ", dir, ": ", error.message()));
  }
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec,
                  error);  // best effort: the directory exists, which is what matters
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
