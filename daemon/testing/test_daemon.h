#pragma once

// Options for an in-process daemon in a unit test: its data directory and socket in the test's
// own temporary directory, a short drain at shutdown, and no spool collection (the machine's
// real spool directories belong to the machine's jobs, never to a test).

#include <string>

#include "absl/time/time.h"
#include "daemon/server/daemon_options.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon::fixtures {

inline DaemonOptions TestDaemonOptions(const ScopedTempDir& dir, const std::string& name = "data",
                                       const std::string& socket = "fs.sock") {
  DaemonOptions options;
  options.data_dir = dir.File(name);
  options.socket_path = dir.File(socket);
  options.drain_timeout = absl::Milliseconds(200);
  options.spool_patterns.clear();
  return options;
}

}  // namespace flopscope::daemon::fixtures
