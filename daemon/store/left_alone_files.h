#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// Rank files the daemon leaves alone, and the file it stores their rank in instead.
//
// A rank's usual file, jobs/<job>/rank-<NNNNN>.sqlite, is sometimes something this daemon must
// not write: a directory, a symbolic link (SQLite follows it: the daemon would write wherever it
// points, /etc/passwd included), or a newer flopscoped's file (schema_version above ours). Such
// an entry stays exactly where and what it is, and the rank's new sessions go to a fresh file
// BESIDE it, at the fixed name jobs/<job>/rank-<NNNNN>.alt.sqlite (AlternateRankFilePath).
//
// Why not move the entry aside, as damaged files are (damaged_files.h)? A damaged file is of no
// use to anyone at its name; a newer daemon's file is: when that daemon comes back it must find
// its data where it put it. One rule for all three cases also keeps an administrator's link or
// directory where they made it. Why a fixed name, not one recorded in the catalog? The catalog
// can be lost and rebuilt from the files alone (catalog_rebuild.h), and a person or a newer
// daemon looking at the job's directory sees both files side by side; a name needs no record.
//
// Writers (StoreRegistry) use the alternate while the usual entry must be left alone, and also
// when the usual entry is gone but an alternate exists (so a rank's sessions stay in one file
// once a link or directory is removed). Readers (QueryService) read the usual file unless it is
// missing or left alone and an alternate exists; either way the report names what it did not
// read. Readers never open a link either (a reader upgrades an older schema in place). The
// check is lstat, then the open: the entries live in the daemon's own data directory (mode
// 0750), so only the daemon's own user could swap one in between.
struct RankFile {
  std::string path;  // the file to open
  // "" when the usual file is the whole story; else, naming both files, what was left alone
  // (or, for a reader, left out) and where the rank's data is.
  std::string note;
};

// Why the daemon must leave the entry at `path` alone ("is a directory", "is a symbolic link
// to /etc/passwd", "is a newer flopscoped's file (schema version 99; this one writes 4)"); ""
// when it may open it: a regular file of a schema it knows, or nothing there. A file that cannot
// be read now says "": whoever opens it reports that error.
std::string WhyLeftAlone(const std::string& path);

// The file new sessions of `job_id`/`rank` are stored in. Logs one error line naming both files
// when it starts an alternate (the first session after the usual file was found left alone).
// FAILED_PRECONDITION, naming both, when the alternate must be left alone too.
absl::StatusOr<RankFile> RankFileForWriting(absl::string_view data_dir, absl::string_view job_id,
                                            int32_t rank);

// The file a query of `job_id`/`rank` reads. FAILED_PRECONDITION when the usual file is a
// symbolic link and there is no alternate yet: nothing is opened through a link.
absl::StatusOr<RankFile> RankFileForReading(absl::string_view data_dir, absl::string_view job_id,
                                            int32_t rank);

}  // namespace flopscope::daemon
