#pragma once

// `flopscope prune JOB...` and `flopscope prune --older-than 7d`: the daemon deletes whole jobs
// (its Query.PruneJobs; this client never touches a file), or with --dry-run lists what would
// go and the bytes it would free.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tls/tls_files.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

struct PruneOptions {
  std::vector<std::string> job_ids;
  std::string older_than;  // "" or an age ParseAge reads
  bool dry_run = false;
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
};

// --older-than's value: a positive whole number and a unit s, m, h, d or w ("7d", "12h").
// INVALID_ARGUMENT saying the form otherwise.
absl::StatusOr<absl::Duration> ParseAge(absl::string_view text);

// The request `options` asks for: INVALID_ARGUMENT for neither or both of jobs and an age, or a
// malformed job id or age.
absl::StatusOr<v1::PruneRequest> MakePruneRequest(const PruneOptions& options);

// What the daemon answered, for people: one line per job (id, ranks, size, last seen in `zone`),
// the total, and the jobs kept because they run.
std::string RenderPruneText(const v1::PruneResponse& response, bool dry_run, absl::TimeZone zone);

absl::Status PruneCommand(const PruneOptions& options, std::ostream& out);

}  // namespace flopscope::client
