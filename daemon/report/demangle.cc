#include "daemon/report/demangle.h"

#include <cxxabi.h>

#include <cstdlib>

#include "absl/strings/match.h"

namespace flopscope::daemon {

std::string Demangle(absl::string_view name) {
  if (!absl::StartsWith(name, "_Z")) return std::string(name);
  const std::string mangled(name);  // __cxa_demangle needs a NUL-terminated string
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) {
    std::free(demangled);
    return mangled;
  }
  std::string out(demangled);
  std::free(demangled);
  return out;
}

}  // namespace flopscope::daemon
