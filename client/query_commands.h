#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace flopscope::client {

// The bodies of `flopscope jobs` and `flopscope report`; main.cc only parses the command line.
// Both ask the daemon through DaemonClient and print (or write) what it answers.

struct JobsOptions {
  std::string socket;           // path or gRPC target
  std::string format = "text";  // "text" or "json"
};
absl::Status JobsCommand(const JobsOptions& options);

struct RanksOptions {
  std::string job_id;
  std::string socket;
  std::string format = "text";
};
absl::Status RanksCommand(const RanksOptions& options);

struct ReportOptions {
  std::string job_id;
  std::vector<int> ranks;  // empty: every rank
  std::string socket;
  std::string format = "text";
  std::string output;  // empty or "-": stdout
};
absl::Status ReportCommand(const ReportOptions& options);

// The process exit status for a command's outcome: 0 OK, 2 for what the user typed wrong
// (INVALID_ARGUMENT), 1 for everything else (daemon not reachable, unknown job, I/O errors).
int ExitCodeFor(const absl::Status& status);

}  // namespace flopscope::client
