#pragma once

// A std::string as the transport ABI's text (fs_str, injector/transport/transport_abi.h), for the
// batch assembler and the transport sink. The view is valid while the string lives unchanged.

#include <cstdint>
#include <string>

#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

inline fs_str View(const std::string& text) {
  return fs_str{text.data(), static_cast<uint32_t>(text.size())};
}

}  // namespace flopscope::injector
