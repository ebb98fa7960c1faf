#pragma once

// A fresh directory per test, removed with its contents when the test ends
// (common/testing/scoped_temp_dir.h), under the name the importer's tests use.

#include "common/testing/scoped_temp_dir.h"

namespace flopscope::importer::testing {

using TempDir = ::flopscope::ScopedTempDir;

}  // namespace flopscope::importer::testing
