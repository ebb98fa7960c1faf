#pragma once

// Lookups in a daemon's Report for report tests.

#include <gtest/gtest.h>

#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::daemon::fixtures {

// The report's module row of `path`; an empty row and a test failure when there is none.
inline const v1::ModuleStats& FindModule(const v1::Report& report, const std::string& path) {
  for (const v1::ModuleStats& module : report.modules()) {
    if (module.path() == path) return module;
  }
  ADD_FAILURE() << "no module " << path;
  static const v1::ModuleStats kNone;
  return kNone;
}

}  // namespace flopscope::daemon::fixtures
