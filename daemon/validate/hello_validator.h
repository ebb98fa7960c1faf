#pragma once

#include "absl/status/status.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

inline constexpr size_t kMaxSessionIdBytes = 256;
inline constexpr size_t kMaxCommandBytes = 65536;
inline constexpr int kMaxDevicesPerSession = 1024;

// Checks the first message of a stream before anything touches the file system: FAILED_PRECONDITION
// for a protocol version this daemon does not speak, INVALID_ARGUMENT (naming the field) for a
// malformed job id (common/job_id.h), a negative rank, a missing session id or text that cannot be
// stored. Pure, like BatchValidator.
absl::Status ValidateHello(const v1::SessionHello& hello);

}  // namespace flopscope::daemon
