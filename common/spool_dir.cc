// The spool directory's checks and the file names of a session in it.

#include "common/spool_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace flopscope {
namespace {

// "a directory of uid 1002, mode 0777", "a symbolic link of uid 0": for the reason a directory
// is refused.
std::string Describe(const struct stat& st) {
  const char* kind = S_ISDIR(st.st_mode)   ? "a directory"
                     : S_ISLNK(st.st_mode) ? "a symbolic link"
                                           : "not a directory";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string(kind) + " of uid " + std::to_string(st.st_uid) + ", mode " + mode;
}

// The first (by name) `<root>/<prefix>*` that is a private directory of ours, or "".
std::string EarlierFallback(const std::string& root, const std::string& prefix) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return "";
  std::vector<std::string> names;
  while (const struct dirent* entry = readdir(dir)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
      names.emplace_back(entry->d_name);
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = root + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
        (st.st_mode & 077) == 0) {
      return path;
    }
  }
  return "";
}

}  // namespace

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
    *error = dir + " is not a private directory of uid " + std::to_string(geteuid()) + " (it is " +
             Describe(st) + "; needs ours, mode 0700)";
    return false;
  }
  return true;
}

SpoolDirectoryChoice ChooseSpoolDirectory(const std::string& wanted,
                                          const std::string& fallback_root) {
  SpoolDirectoryChoice choice;
  std::string refused;
  if (PrepareSpoolDirectory(wanted, &refused)) {
    choice.dir = wanted;
    return choice;
  }
  const std::string prefix = "flopscope-spool-" + std::to_string(geteuid()) + "-";
  std::string fallback = EarlierFallback(fallback_root, prefix);
  std::string error;
  if (fallback.empty()) {
    std::string name = fallback_root + "/" + prefix + "XXXXXX";
    if (mkdtemp(name.data()) != nullptr) {
      fallback = name;
    } else {
      error = "cannot create " + name + ": " + std::strerror(errno);
    }
  }
  if (!fallback.empty() && !PrepareSpoolDirectory(fallback, &error)) fallback.clear();
  if (fallback.empty()) {
    choice.error = refused + ", and no private fallback: " + error;
    choice.warning = "SPOOL OFF: " + choice.error +
                     "; records the daemon has not acknowledged are lost if it is away or this "
                     "process is killed";
    return choice;
  }
  choice.dir = fallback;
  const bool taken = refused.find("is not a private directory") != std::string::npos;
  choice.warning = "spool directory refused: " + refused +
                   (taken ? " (someone else may have made it first)" : "") + "; spooling to " +
                   fallback + " instead (remove the refused directory, or set FLOPSCOPE_SPOOL_DIR)";
  return choice;
}

std::string SpoolDestinationName(const std::string& target) {
  // One spelling per address: a unix socket is its path, made lexically normal ("//", "/./").
  std::string address = target;
  if (address.rfind("unix:", 0) == 0) address.erase(0, 5);
  if (!address.empty() && address[0] == '/') {
    address = std::filesystem::path(address).lexically_normal().string();
  }
  // FNV-1a, 64 bits: stable across builds and hosts (the injector and the daemon must agree).
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : address) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  constexpr size_t kReadableChars = 48;
  std::string readable;
  for (char c : address.substr(address.size() - std::min(address.size(), kReadableChars))) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
    if (plain || !readable.empty()) readable += plain ? c : '_';  // no leading '_'
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return "to-" + readable + "-" + hex;
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
