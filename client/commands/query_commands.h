#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tls/tls_files.h"

namespace flopscope::client {

// The bodies of `flopscope jobs` and `flopscope report`; main.cc only parses the command line.
// Both ask the daemon through DaemonClient and print (or write) what it answers.

struct JobsOptions {
  std::string socket;              // path or gRPC target
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  std::string format = "text";     // "text" or "json"
};
absl::Status JobsCommand(const JobsOptions& options);

struct RanksOptions {
  std::string job_id;
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  std::string format = "text";
  std::optional<double> peak_tflops;  // overrides the peak table for MFU
  std::string precision;              // overrides the dominant precision for MFU
  // A rank is flagged when the others wait for it this share of the median period, or when
  // its step is this much above the median where nobody waits (rank_stragglers.h).
  double slow_pct = 5;
  std::string steps;  // as ReportOptions.steps; "": report's default (warm-up left out)
};
absl::Status RanksCommand(const RanksOptions& options);

struct ReportOptions {
  std::string job_id;
  std::vector<int> ranks;  // empty: every rank
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  std::string format = "text";     // text, json, csv (DeepSpeed profile) or tree (module tree)
  std::string output;              // empty or "-": stdout
  // The DeepSpeed-style profile (profile_commands.h).
  int depth = -1;     // detailed profile down to this depth; -1: all
  int top = 1;        // aggregated profile: top modules per depth
  std::string steps;  // "A:B", "A:", ":B" or "A" (connect/step_window.h: ParseStepWindow)
  std::string group;  // "", "mp:K" or "dp"
  std::optional<double> peak_tflops;  // overrides the peak table
  std::string precision;              // overrides the dominant precision for MFU
  // --kernels PATH: instead of the profile, the top GPU activities of that module and its
  // descendants ("/" for the whole job); --top-kernels N: how many (kernels_command.h).
  std::string kernels_of;
  int top_kernels = 10;
};
absl::Status ReportCommand(const ReportOptions& options);

// The process exit status for a command's outcome: 0 OK, 2 for what the user typed wrong
// (INVALID_ARGUMENT), 1 for everything else (daemon not reachable, unknown job, I/O errors).
int ExitCodeFor(const absl::Status& status);

}  // namespace flopscope::client
