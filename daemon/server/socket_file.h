#pragma once

#include <string>

#include "absl/status/status.h"

namespace flopscope::daemon {

// Makes `path` ready to listen on: its directory exists (created with mode 0755: the socket is
// reachable by every user, authorisation is per call); a socket file nobody listens on (left
// by a daemon that crashed) is removed. FAILED_PRECONDITION "another flopscoped is already
// serving <path>" when a server answers there, and for a path that is not a socket (never
// deleted) or too long for a unix socket address.
absl::Status PrepareSocketPath(const std::string& path);

// True when a connect() to the unix socket at `path` succeeds.
bool SocketIsLive(const std::string& path);

}  // namespace flopscope::daemon
