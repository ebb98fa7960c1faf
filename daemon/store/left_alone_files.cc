#include "daemon/store/left_alone_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/base/logger.h"
#include "daemon/store/data_layout.h"
#include "daemon/store/rank_schema.h"

namespace flopscope::daemon {
namespace {

// What a symbolic link points to, for the log and the report ("" when it cannot be read).
std::string LinkTarget(const std::string& path) {
  std::error_code error;
  const std::filesystem::path target = std::filesystem::read_symlink(path, error);
  return error ? "" : target.string();
}

// The schema version of the regular file at `path`, opened read-only (nothing is written to
// it); 0 when it cannot be read or has none.
int64_t FileSchemaVersion(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(path);
  if (!db.ok()) return 0;
  absl::StatusOr<int64_t> version = RankSchema::Version(**db);
  return version.ok() ? *version : 0;
}

// Whether something (even a dangling link) is at `path`.
bool Exists(const std::string& path) {
  struct stat info;
  return lstat(path.c_str(), &info) == 0;
}

}  // namespace

std::string WhyLeftAlone(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return "";
  if (S_ISDIR(info.st_mode)) return "is a directory";
  if (S_ISLNK(info.st_mode)) return absl::StrCat("is a symbolic link to ", LinkTarget(path));
  if (!S_ISREG(info.st_mode)) return "is not a regular file";
  if (const int64_t version = FileSchemaVersion(path); version > kSchemaVersion) {
    return absl::StrCat("is a newer flopscoped's file (schema version ", version,
                        "; this one writes ", kSchemaVersion, ")");
  }
  return "";
}

absl::StatusOr<RankFile> RankFileForWriting(absl::string_view data_dir, absl::string_view job_id,
                                            int32_t rank) {
  const std::string usual = RankFilePath(data_dir, job_id, rank);
  const std::string alternate = AlternateRankFilePath(data_dir, job_id, rank);
  const std::string why = WhyLeftAlone(usual);
  if (why.empty()) {
    // The entry was removed after an alternate was started: the rank stays in the alternate.
    if (Exists(usual) || !Exists(alternate)) return RankFile{usual, ""};
  }
  if (const std::string also = WhyLeftAlone(alternate); !also.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(usual, why.empty() ? " is missing" : absl::StrCat(" ", why), " and ",
                     alternate, " ", also, ": both left alone (move one of them away)"));
  }
  if (why.empty()) return RankFile{alternate, ""};
  std::string note = absl::StrCat(usual, " ", why, ": left alone, never written; the rank's new ",
                                  "sessions are stored beside it in ", alternate);
  if (!Exists(alternate)) LogError(note);
  return RankFile{alternate, std::move(note)};
}

absl::StatusOr<RankFile> RankFileForReading(absl::string_view data_dir, absl::string_view job_id,
                                            int32_t rank) {
  const std::string usual = RankFilePath(data_dir, job_id, rank);
  const std::string alternate = AlternateRankFilePath(data_dir, job_id, rank);
  // The common case costs two lstat calls: no alternate, the usual file read as it is, unless
  // it is a link (a reader may write too: it upgrades an older file's schema in place).
  if (!Exists(alternate)) {
    struct stat info;
    if (lstat(usual.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(usual, " is a symbolic link to ", LinkTarget(usual),
                       ": left alone, not read (the daemon never opens a link)"));
    }
    return RankFile{usual, ""};
  }
  if (!Exists(usual)) return RankFile{alternate, ""};
  if (const std::string why = WhyLeftAlone(usual); !why.empty()) {
    return RankFile{alternate, absl::StrCat(usual, " ", why, ": left alone, not read (these ",
                                            "figures are what this daemon stored beside it in ",
                                            alternate, ")")};
  }
  // Both hold sessions (a valid file was put back at the usual name): the usual one is read.
  return RankFile{usual,
                  absl::StrCat(alternate, " also holds sessions of this rank (stored while ", usual,
                               " had to be left alone): not read, not in these figures")};
}

}  // namespace flopscope::daemon
