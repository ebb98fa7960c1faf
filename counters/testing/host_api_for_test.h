#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "counters/profiler_host_api.h"

namespace flopscope::counters::testing {

// The real Profiler Host API of the libcupti this build was configured with (or
// FLOPSCOPE_CUPTI_PATH), loaded once per test binary. Fails the calling test when it cannot load:
// the counters directory is only built where CUPTI is, so there is nothing to skip.
inline const ProfilerHostApi& HostApiForTest() {
  static const ProfilerHostApi api = [] {
    ProfilerHostApi loaded;
    std::string error;
    const char* path = std::getenv("FLOPSCOPE_CUPTI_PATH");
    EXPECT_TRUE(LoadProfilerHostApi(path != nullptr ? path : "", &loaded, &error)) << error;
    return loaded;
  }();
  return api;
}

}  // namespace flopscope::counters::testing
