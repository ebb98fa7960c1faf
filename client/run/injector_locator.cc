#include "client/run/injector_locator.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> CanonicalRegularFile(const fs::path& path, const std::string& hint) {
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("injector library not found at ", path.string(), " (", hint, ")"));
  }
  if (!fs::is_regular_file(canonical, error)) {
    return absl::NotFoundError(absl::StrCat("injector library ", canonical.string(),
                                            " is not a regular file (", hint, ")"));
  }
  return canonical.string();
}

}  // namespace

absl::StatusOr<std::string> LocateInjector(const Environment& env, std::string_view self_exe) {
  if (std::optional<std::string> explicit_path = env.GetNonEmpty(kInjectLibEnv)) {
    return CanonicalRegularFile(
        *explicit_path, absl::StrCat("set by ", kInjectLibEnv, "; point it at ", kInjectLibName));
  }
  if (self_exe.empty()) {
    return absl::NotFoundError(absl::StrCat("cannot tell where flopscope is installed; set ",
                                            kInjectLibEnv, " to the path of ", kInjectLibName));
  }
  const fs::path beside = fs::path(self_exe).parent_path() / ".." / "lib" / kInjectLibName;
  return CanonicalRegularFile(
      beside.lexically_normal(),
      absl::StrCat("build the flopscope_inject target, or set ", kInjectLibEnv, " to its path"));
}

std::string SelfExecutablePath() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string() : self.string();
}

}  // namespace flopscope::client
