#pragma once

// `flopscope where JOB` (issue 31): every rank's innermost open module now and how long it has
// been open, the ranks grouped by place and the ones not where the others are
// (client/model/open_range_places.h), from the daemon's latest snapshot of each rank's open
// ranges (Query.GetOpenRanges).

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/tls/tls_files.h"

namespace flopscope::client {

struct WhereOptions {
  std::string job_id;
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  std::string format = "text";     // text or json
};

absl::Status WhereCommand(const WhereOptions& options);

}  // namespace flopscope::client
