#pragma once

// The spool directory, shared by the injector core (which creates a session's made-counts file
// there as it starts, common/made_counts_page.h) and the transport (which writes the session's
// spool file there, common/spool/spool_file.h): how it is made safe to use, the folder in it for
// the daemon the session was opened for, and the name a session's files share in that folder.
//
// Layout: `<spool dir>/<destination>/<session>.spool` and `.made`, where <destination> names the
// daemon address the session was aimed at (SpoolDestinationName). A spool is delivered only to
// that daemon (its collector and its users' next processes look in their own folder), or to one
// the user names (flopscoped --collect-spools-for): records never land in another daemon.
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

// The folder of a spool directory that holds the sessions opened for the daemon at `target`
// (a gRPC target as GrpcTarget gives it, or a socket path): the address's last characters made
// safe for a file name, then a hash of the whole address, so two addresses never share a folder
// and `ls` still shows which daemon a folder waits for. "unix:/a//b.sock", "unix:///a/b.sock"
// and "/a/b.sock" are one address.
std::string SpoolDestinationName(const std::string& target);

// The base name of a session's files (without a suffix): its id with every character other
// than [A-Za-z0-9_-] replaced, so that a name never leaves the directory.
std::string SessionFileStem(const std::string& session_id);

}  // namespace flopscope
