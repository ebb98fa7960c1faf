#include "counters/cupti_library.h"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>

#include <vector>

namespace flopscope::counters {
namespace {

#ifndef FLOPSCOPE_CUPTI_TOOLKIT_LIBRARY
#define FLOPSCOPE_CUPTI_TOOLKIT_LIBRARY ""
#endif

std::vector<std::string> Candidates(const std::string& explicit_path) {
  if (!explicit_path.empty()) return {explicit_path};
  std::vector<std::string> paths = {"libcupti.so.13"};
  const std::string toolkit = FLOPSCOPE_CUPTI_TOOLKIT_LIBRARY;
  if (!toolkit.empty()) paths.push_back(toolkit);
  return paths;
}

// RTLD_LOCAL: CUPTI's symbols stay out of the job's global scope. RTLD_NOW: a library that lacks
// what it needs fails here, in one place, rather than in the middle of a callback.
void* Open(const std::string& path, std::string* why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* message = dlerror();
    *why = message != nullptr ? message : path + ": dlopen failed";
  }
  return handle;
}

// The file behind `handle`, so messages name the copy that was really mapped.
std::string MappedFile(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

bool ReadVersion(void* handle, CuptiLibrary* library, std::string* error) {
  auto get_version =
      reinterpret_cast<decltype(&::cuptiGetVersion)>(dlsym(handle, "cuptiGetVersion"));
  if (get_version == nullptr) {
    *error =
        library->path + " is not libcupti (it lacks cuptiGetVersion); set FLOPSCOPE_CUPTI_PATH";
    return false;
  }
  if (get_version(&library->version) != CUPTI_SUCCESS) {
    *error =
        library->path + ": cuptiGetVersion failed; set FLOPSCOPE_CUPTI_PATH to a CUDA 13 libcupti";
    return false;
  }
  if (library->version < kMinimumCuptiVersion) {
    *error = library->path + " is CUPTI API version " + std::to_string(library->version) +
             "; flopscope needs version " + std::to_string(kMinimumCuptiVersion) +
             " or later (CUDA 13): set FLOPSCOPE_CUPTI_PATH to a newer libcupti";
    return false;
  }
  return true;
}

}  // namespace

bool OpenCuptiLibrary(const std::string& explicit_path, CuptiLibrary* out, std::string* error) {
  std::string tried;
  for (const std::string& path : Candidates(explicit_path)) {
    std::string why;
    void* handle = Open(path, &why);
    if (handle == nullptr) {
      tried += (tried.empty() ? "" : "; ") + why;
      continue;
    }
    CuptiLibrary library;
    library.handle = handle;
    library.path = MappedFile(handle, path);
    if (!ReadVersion(handle, &library, error)) return false;
    *out = library;
    return true;
  }
  *error = "libcupti not found (" + tried + "); set FLOPSCOPE_CUPTI_PATH to its path";
  return false;
}

}  // namespace flopscope::counters
