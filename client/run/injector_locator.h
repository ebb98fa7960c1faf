#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/connect/environment.h"

namespace flopscope::client {

// (char arrays, not std::string_view: Debian's Abseil has its own absl::string_view type.)
inline constexpr char kInjectLibEnv[] = "FLOPSCOPE_INJECT_LIB";
inline constexpr char kInjectLibName[] = "libflopscope_inject.so";

// Where the injector library is: $FLOPSCOPE_INJECT_LIB when set, else
// `<directory of self_exe>/../lib/libflopscope_inject.so` (the build and install layout).
// Returns an absolute, canonical path to an existing regular file, or NOT_FOUND with a message
// that names the path tried and how to fix it.
absl::StatusOr<std::string> LocateInjector(const Environment& env, std::string_view self_exe);

// The running executable (/proc/self/exe), or an empty string when it cannot be read.
std::string SelfExecutablePath();

}  // namespace flopscope::client
