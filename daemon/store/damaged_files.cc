#include "daemon/store/damaged_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/sqlite/sqlite_db.h"
#include "common/sqlite/sqlite_statement.h"
#include "daemon/base/logger.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/left_alone_files.h"

namespace flopscope::daemon {
namespace {

constexpr char kDamagedSuffix[] = ".damaged";
constexpr int kMaxFindings = 3;  // quick_check can list thousands of problems: the first few

// SQLite's words for bytes that are wrong (SQLITE_CORRUPT, SQLITE_NOTADB). Any other failure
// (an I/O error, a full disk, a lock held elsewhere, no memory) says nothing about the file.
bool SaysDamaged(absl::string_view problem) {
  return absl::StrContains(problem, "database disk image is malformed") ||
         absl::StrContains(problem, "file is not a database");
}

// "" when `path` opens and passes PRAGMA quick_check, or cannot be checked now (left in place:
// whoever opens it next reports that error); else what is wrong with it. `*newer`: it is a
// newer daemon's file (sound, and left alone).
std::string DamageOf(const std::string& path, bool* newer) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  if (!db.ok()) {
    // A newer daemon's file, or an empty one, is sound: opening it says what to do.
    const absl::string_view problem = db.status().message();
    if (SaysDamaged(problem)) return std::string(problem);
    *newer = absl::StrContains(problem, "has schema version");
    if (!*newer && !absl::EndsWith(problem, "is not a flopscope database")) {
      LogWarning("cannot check ", path, " now (", problem, "): left in place");
    }
    return "";
  }
  std::string findings;
  int count = 0;
  const absl::Status status =
      (*db)->ForEachRow("PRAGMA quick_check", [&](const SqliteStatement& row) {
        const std::string line = row.ColumnString(0);
        if (line != "ok" && count++ < kMaxFindings) {
          absl::StrAppend(&findings, findings.empty() ? "" : "; ", line);
        }
        return absl::OkStatus();
      });
  if (!status.ok()) {
    if (SaysDamaged(status.message())) return std::string(status.message());
    LogWarning("cannot check ", path, " now (", status.message(), "): left in place");
  }
  return findings;
}

// The first of <path>.damaged, <path>.damaged.1, ... that does not exist yet.
std::string FreeDamagedName(const std::string& path) {
  std::string name = absl::StrCat(path, kDamagedSuffix);
  for (int n = 1; std::filesystem::exists(name); ++n) {
    name = absl::StrCat(path, kDamagedSuffix, ".", n);
  }
  return name;
}

// Renames the file and its WAL (which holds committed pages of it); the shared-memory index is
// rebuilt from them by whoever opens the copy, so it just goes.
bool MoveAside(const std::string& path, const std::string& to) {
  if (rename(path.c_str(), to.c_str()) != 0) return false;
  rename((path + "-wal").c_str(), (to + "-wal").c_str());
  unlink((path + "-shm").c_str());
  return true;
}

// One error line for an entry the daemon leaves alone (left_alone_files.h). `alternate`: where
// the rank of a rank file `path` is stored instead; "" for the catalog and alternates themselves.
void LogLeftAlone(const std::string& path, const std::string& alternate) {
  LogError(path, " ", WhyLeftAlone(path), ": left alone, and never written",
           alternate.empty()
               ? ""
               : absl::StrCat("; its rank's new sessions are stored beside it in ", alternate));
}

void CheckOne(const std::string& path, const std::string& alternate,
              std::vector<DamagedFile>* damaged) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return;
  if (!S_ISREG(info.st_mode)) {
    LogLeftAlone(path, alternate);
    return;
  }
  bool newer = false;
  std::string problem = DamageOf(path, &newer);
  if (newer) LogLeftAlone(path, alternate);
  if (problem.empty()) return;
  const std::string to = FreeDamagedName(path);
  if (!MoveAside(path, to)) {
    LogError("damaged file ", path, " (", problem,
             ") could not be moved aside: ", std::strerror(errno));
    return;
  }
  LogError("damaged file ", path, " moved aside to ", to, ": ", problem);
  damaged->push_back(DamagedFile{path, to, std::move(problem)});
}

// The alternate of the usual rank file `path` (data_layout.h); "" when `path` is an alternate.
std::string AlternateOf(const std::string& path) {
  constexpr absl::string_view kAlternate = ".alt.sqlite";
  if (absl::EndsWith(path, kAlternate)) return "";
  return absl::StrCat(absl::StripSuffix(path, ".sqlite"), kAlternate);
}

}  // namespace

std::vector<DamagedFile> QuarantineDamagedFiles(const std::string& data_dir) {
  std::vector<DamagedFile> damaged;
  CheckOne(CatalogPath(data_dir), "", &damaged);
  std::error_code error;
  const std::filesystem::path jobs = std::filesystem::path(data_dir) / "jobs";
  for (const auto& job : std::filesystem::directory_iterator(jobs, error)) {
    if (!job.is_directory(error)) continue;
    for (const auto& file : std::filesystem::directory_iterator(job.path(), error)) {
      const std::string name = file.path().filename().string();
      if (!absl::StartsWith(name, "rank-") || !absl::EndsWith(name, ".sqlite")) continue;
      const std::string path = file.path().string();
      CheckOne(path, AlternateOf(path), &damaged);
    }
  }
  return damaged;
}

std::string DamagedCopyOf(const std::string& path) {
  std::string name = absl::StrCat(path, kDamagedSuffix);
  if (!std::filesystem::exists(name)) return "";
  // The latest of several: the highest number that exists.
  for (int n = 1;; ++n) {
    std::string next = absl::StrCat(path, kDamagedSuffix, ".", n);
    if (!std::filesystem::exists(next)) return name;
    name = std::move(next);
  }
}

}  // namespace flopscope::daemon
