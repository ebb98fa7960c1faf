#pragma once

#include <cstdint>

namespace flopscope {

// Bumped when proto/flopscope/v1 changes in a way an older daemon cannot read.
inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr const char* kVersion = "0.1.0";

}  // namespace flopscope
