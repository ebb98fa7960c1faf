// The spool directory's checks and the file names of a session in it.

#include "common/spool_dir.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace flopscope {

bool PrepareSpoolDirectory(const std::string& dir, std::string* error) {
  if (dir.empty()) {
    *error = "no spool directory";
    return false;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot create " + dir + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *error = "cannot stat " + dir + ": " + std::strerror(errno);
    return false;
  }
  // Hazard: a directory another user made (or can write) could feed us their files or take ours.
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    *error = dir + " is not a private directory of uid " + std::to_string(geteuid()) +
             " (needs mode 0700)";
    return false;
  }
  return true;
}

std::string SessionFileStem(const std::string& session_id) {
  std::string name;
  for (char c : session_id) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    name += plain ? c : '_';
  }
  if (name.empty()) name = "session";
  return name;
}

}  // namespace flopscope
