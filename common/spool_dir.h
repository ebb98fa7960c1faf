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
// reason otherwise (another user's or a group/world-accessible directory is never used).
bool PrepareSpoolDirectory(const std::string& dir, std::string* error);

// The base name of a session's files (without a suffix): its id with every character other
// than [A-Za-z0-9_-] replaced, so that a name never leaves the directory.
std::string SessionFileStem(const std::string& session_id);

}  // namespace flopscope
