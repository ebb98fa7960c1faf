#pragma once

// A fresh directory per test, removed with everything in it when the test ends
// (common/testing/scoped_temp_dir.h), under the name the daemon's tests use.

#include "common/testing/scoped_temp_dir.h"

namespace flopscope::daemon::fixtures {

using ScopedTempDir = ::flopscope::ScopedTempDir;

}  // namespace flopscope::daemon::fixtures
