#include "daemon/catalog/catalog_rebuild.h"

#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/job_id.h"
#include "common/sqlite/sqlite_db.h"
#include "common/sqlite/sqlite_statement.h"
#include "daemon/base/logger.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/left_alone_files.h"
#include "daemon/store/rank_store.h"

namespace flopscope::daemon {
namespace {

// The rank number of "rank-<NNNNN>.sqlite" or "rank-<NNNNN>.alt.sqlite", or nullopt for any
// other name.
std::optional<int32_t> RankOfFileName(const std::string& name) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, "rank-") || !absl::ConsumeSuffix(&digits, ".sqlite")) {
    return std::nullopt;
  }
  absl::ConsumeSuffix(&digits, ".alt");
  int32_t rank = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &rank) || rank < 0) return std::nullopt;
  return rank;
}

// The hello of the file's most recently seen session and when that was.
absl::Status LatestHello(const std::string& path, v1::SessionHello* hello, int64_t* seen_ns) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  if (!db.ok()) return db.status();
  bool found = false;
  absl::Status status = (*db)->ForEachRow(
      "SELECT hello, last_seen_ns FROM sessions ORDER BY last_seen_ns DESC LIMIT 1",
      [&](const SqliteStatement& row) {
        found = hello->ParseFromString(row.ColumnString(0));
        *seen_ns = row.ColumnInt(1);
        return absl::OkStatus();
      });
  if (status.ok() && !found) status = absl::NotFoundError("no readable session");
  return status;
}

// Lists one rank file; false (after a warning) when it cannot be read.
bool Relist(const std::string& path, const std::string& job_id, int32_t rank, Catalog* catalog) {
  v1::SessionHello hello;
  int64_t seen_ns = 0;
  absl::Status status = LatestHello(path, &hello, &seen_ns);
  absl::StatusOr<std::unique_ptr<RankStore>> store =
      status.ok() ? RankStore::Open(path) : absl::StatusOr<std::unique_ptr<RankStore>>(status);
  if (store.ok()) {
    // The file's place decides, whatever its hello says.
    hello.set_job_id(job_id);
    hello.set_rank(rank);
    status = catalog->SessionConnected(hello, seen_ns);
    if (status.ok()) status = catalog->UpdateTotals(job_id, rank, (*store)->Totals(), seen_ns);
    if (status.ok()) status = catalog->SessionDisconnected(job_id, rank, seen_ns);
  } else {
    status = store.status();
  }
  if (!status.ok()) LogWarning("cannot list ", path, " in the new catalog: ", status.message());
  return status.ok();
}

}  // namespace

size_t RelistRankFiles(const std::string& data_dir, Catalog* catalog) {
  size_t listed = 0;
  std::error_code error;
  const std::filesystem::path jobs = std::filesystem::path(data_dir) / "jobs";
  for (const auto& job : std::filesystem::directory_iterator(jobs, error)) {
    const std::string job_id = job.path().filename().string();
    if (!job.is_directory(error) || !JobIdProblem(job_id).empty()) continue;
    for (const auto& file : std::filesystem::directory_iterator(job.path(), error)) {
      const std::string name = file.path().filename().string();
      const std::optional<int32_t> rank = RankOfFileName(name);
      // One file per rank, the one queries read (left_alone_files.h); never through a link.
      const absl::StatusOr<RankFile> read =
          rank ? RankFileForReading(data_dir, job_id, *rank) : absl::NotFoundError(name);
      if (read.ok() && !file.is_symlink(error) && file.is_regular_file(error) &&
          std::filesystem::path(read->path).filename() == name &&
          Relist(file.path().string(), job_id, *rank, catalog)) {
        ++listed;
      }
    }
  }
  return listed;
}

}  // namespace flopscope::daemon
