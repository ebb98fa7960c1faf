#pragma once

#include <string>
#include <vector>

namespace flopscope::daemon {

// A database file found damaged at start and moved out of the daemon's way.
struct DamagedFile {
  std::string path;      // where it was: the catalog or jobs/<job>/rank-<NNNNN>.sqlite
  std::string moved_to;  // where it is now: <path>.damaged (then .damaged.1, ... if taken)
  std::string problem;   // what SQLite said (quick_check's first findings, or the open error)
};

// Checks the catalog and every rank file under `data_dir` with PRAGMA quick_check before
// anything opens them for writing. A damaged one (and its WAL) is renamed to
// "<path>.damaged", with one error log line naming both paths, so that it is never written
// again: the next session of that rank starts a fresh file, and reports name the moved file
// (DamagedCopyOf). What the daemon must leave alone (a directory, a symlink, a newer daemon's
// file: left_alone_files.h) stays, with one error log line naming the file its rank's new
// sessions go to. Cost: one read of every page of every file.
std::vector<DamagedFile> QuarantineDamagedFiles(const std::string& data_dir);

// The path a damaged `path` was moved to at some start, or "" when there is none.
std::string DamagedCopyOf(const std::string& path);

}  // namespace flopscope::daemon
