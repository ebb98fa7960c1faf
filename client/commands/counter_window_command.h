#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tls/tls_files.h"
#include "flopscope/v1/profiling.pb.h"

namespace flopscope::client {

// `flopscope profile JOB [--rank R]... --count N [--set full|cheap] [--timeout-ms T]`: asks the
// daemon to open a counter window (FLOPs from hardware counters) over the next N steps of the
// job's running ranks, and prints which ranks accepted.

struct CounterWindowOptions {
  std::string job_id;
  std::vector<int> ranks;  // empty: every connected rank
  int steps = 0;           // --count: required, > 0
  // The old `--steps N`, as typed: refused with the fix (steps A:B is the report's window).
  std::string old_steps;
  std::string metric_set;  // "" (the process's default), "full" or "cheap"
  int timeout_ms = 5000;   // how long the daemon waits for the processes' replies
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
};

// The request for `options`, or INVALID_ARGUMENT naming what is wrong. The daemon checks the
// upper limits (steps, timeout) and answers with its own message.
absl::StatusOr<flopscope::v1::OpenCounterWindowRequest> BuildCounterWindowRequest(
    const CounterWindowOptions& options);

// One line per answer ("rank 0  accepted  counting the next 2 steps"), then "2 of 4 ranks
// accepted". A rank with more than one live process names each one's session.
std::string RenderCounterWindowAnswers(const flopscope::v1::OpenCounterWindowResponse& response);

// How many distinct ranks accepted.
int AcceptedRankCount(const flopscope::v1::OpenCounterWindowResponse& response);

// The whole command: prints the answers to `out` and returns the exit status (0 when at least one
// rank accepted, 1 when none did). Errors (bad options, daemon unreachable, unknown job, nothing
// connected) come back as a status for the caller to print.
absl::StatusOr<int> CounterWindowCommand(const CounterWindowOptions& options, std::ostream& out);

}  // namespace flopscope::client
