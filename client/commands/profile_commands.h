#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands/query_commands.h"
#include "client/connect/daemon_client.h"

namespace flopscope::client {

// The DeepSpeed-style `flopscope report` (formats text, json, csv): asks the daemon for the
// report of the ranks wanted (one rank, every rank, or a parallel group) and renders the profile.
//   --group mp:K  the K-th model replica (ranks with dp_rank K): one report per rank, combined
//                 by CombineModelReplica (sums, max latency);
//   --group dp    every replica so combined, then the per-module spread across them.
// --steps A:B narrows every figure to those steps (the daemon's medians per step).
absl::StatusOr<std::string> RenderProfileReport(const DaemonClient& daemon,
                                                const ReportOptions& options);

// `flopscope diff JOB_A JOB_B`: the profiles of both jobs (all ranks, or `rank` when >= 0),
// compared per module (diff_view.h); format text or json.
struct DiffOptions {
  std::string job_a;
  std::string job_b;
  int rank = -1;
  std::string steps;  // as `report --steps`, the same window in both jobs; "": warm-up left out
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  std::string format = "text";
  std::string output;
};
absl::Status DiffCommand(const DiffOptions& options);

// "mp:3" -> 3; "dp" -> -1; anything else INVALID_ARGUMENT.
absl::StatusOr<int> ParseGroup(const std::string& group);

}  // namespace flopscope::client
