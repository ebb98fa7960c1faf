#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// The C++ name behind a mangled kernel name ("_Z4gemmPfS_i" -> "gemm(float*, float*, int)");
// the name itself when it is not an Itanium-mangled name or does not demangle.
std::string Demangle(absl::string_view name);

}  // namespace flopscope::daemon
