#include "injector/cupti/counter_windows/comm_kernels.h"

#include <array>
#include <cctype>

namespace flopscope::injector::cupti {
namespace {

// Prefixes of a kernel's own (first) name that mark a communication kernel.
constexpr std::array<std::string_view, 3> kKernelPrefixes = {"ncclKernel", "ncclDevKernel",
                                                             "mscclKernel"};
// Outermost namespaces whose kernels are all communication kernels.
constexpr std::array<std::string_view, 2> kNamespaces = {"c10d", "deep_ep"};

// Reads an Itanium <source-name> (<length><identifier>) at *pos.
bool ReadSourceName(std::string_view symbol, size_t* pos, std::string_view* name) {
  size_t length = 0;
  size_t at = *pos;
  while (at < symbol.size() && std::isdigit(static_cast<unsigned char>(symbol[at])) != 0) {
    length = length * 10 + static_cast<size_t>(symbol[at] - '0');
    if (length > symbol.size()) return false;
    ++at;
  }
  if (at == *pos || length == 0 || at + length > symbol.size()) return false;
  *name = symbol.substr(at, length);
  *pos = at + length;
  return true;
}

// The first component of the name: the kernel's own name when it has no namespace, else its
// outermost namespace (`nested` tells which). Empty when the name cannot be read.
std::string_view FirstComponent(std::string_view symbol, bool* nested) {
  *nested = false;
  if (symbol.substr(0, 2) != "_Z") {
    // Not mangled (extern "C", or a demangled name): up to the first '(' or "::".
    const size_t end = symbol.find_first_of("(<: ");
    if (end != std::string_view::npos && symbol.substr(end, 2) == "::") *nested = true;
    return symbol.substr(0, end);
  }
  size_t pos = 2;
  if (pos < symbol.size() && symbol[pos] == 'L') ++pos;  // internal linkage
  if (pos < symbol.size() && symbol[pos] == 'N') {
    *nested = true;
    ++pos;
    while (pos < symbol.size() &&
           (symbol[pos] == 'K' || symbol[pos] == 'V' || symbol[pos] == 'r')) {
      ++pos;  // cv-qualifiers of a member function
    }
  }
  std::string_view name;
  return ReadSourceName(symbol, &pos, &name) ? name : std::string_view();
}

}  // namespace

bool IsCommunicationKernel(std::string_view symbol) {
  bool nested = false;
  const std::string_view first = FirstComponent(symbol, &nested);
  if (first.empty()) return false;
  if (nested) {
    for (std::string_view space : kNamespaces) {
      if (first == space) return true;
    }
    return false;
  }
  for (std::string_view prefix : kKernelPrefixes) {
    if (first.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace flopscope::injector::cupti
