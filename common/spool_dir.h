#pragma once

// The spool directory, shared by the injector core (which creates a session's made-counts file
// there as it starts, common/made_counts_page.h) and the transport (which writes the session's
// spool file there, common/spool/spool_file.h): how it is made safe to use, and the name
// a session's files share in it.
//
// Dependency-free (the injector links it): no Abseil.

#include <string>

namespace flopscope {

// Makes sure `dir` is a directory of ours with mode 0700 (created if absent); false with the
// reason otherwise (another user's or a group/world-accessible directory is never used), which
// names the directory's owner and mode.
bool PrepareSpoolDirectory(const std::string& dir, std::string* error);

// Where a session's spool goes. `wanted` when PrepareSpoolDirectory accepts it. Else (hazard:
// anyone may create /var/tmp/flopscope-spool-<uid> before its user does, and so switch off that
// user's spool) a private fallback of ours under `fallback_root`: the first
// `flopscope-spool-<uid>-*` there that is a directory of ours with mode 0700 (an earlier
// fallback, so a user's processes share one), else a new one made by mkdtemp (0700). The
// daemon's collector finds both with its default pattern /var/tmp/flopscope-spool-*.
struct SpoolDirectoryChoice {
  std::string dir;      // empty: no spool at all (`error` says why)
  std::string warning;  // when `wanted` was refused: which, why, and where the spool went
  std::string error;
};
SpoolDirectoryChoice ChooseSpoolDirectory(const std::string& wanted,
                                          const std::string& fallback_root = "/var/tmp");

// The base name of a session's files (without a suffix): its id with every character other
// than [A-Za-z0-9_-] replaced, so that a name never leaves the directory.
std::string SessionFileStem(const std::string& session_id);

}  // namespace flopscope
