#pragma once

// The disk budget of a data directory (flopscoped --max-disk, DESIGN: Storage): which jobs to
// delete, oldest first, so that the jobs' files fit. Folding (step_folding.h) keeps a running
// job small; the budget is what bounds the many finished jobs a node accumulates.
//
// The policy, the measuring and the option's parsing are here; daemon/retention/job_pruner.h
// deletes what the policy chooses (the periodic pass, and `flopscope prune`).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// One job as the budget sees it.
struct JobUsage {
  std::string job_id;
  int64_t last_seen_ns = 0;  // the catalog's JobInfo.last_seen_ns
  uint64_t bytes = 0;        // JobBytes
  bool running = false;      // some rank connected (or its store open): never deleted
};

// The jobs to delete, in deletion order, so that what is left is at most `max_bytes`: the jobs
// not running, least recently seen first (ties: the larger first, then by id, so the plan is
// deterministic). Running jobs are never chosen, even when they alone exceed the budget (their
// old steps are folded instead); then every other job is chosen.
std::vector<std::string> PlanPrune(std::vector<JobUsage> jobs, uint64_t max_bytes);

// The bytes of the regular files under a job's directory (its rank files, their WAL and
// shared-memory files). A missing directory is 0.
absl::StatusOr<uint64_t> JobBytes(absl::string_view job_directory);

// --max-disk's value: a positive size, a number (decimals allowed) with an optional unit B, K,
// M, G or T (powers of 1024, as du and df count; "KiB", "KB" and "k" read the same), e.g.
// "20G", "500M", "1.5T", "4096". INVALID_ARGUMENT saying the form otherwise.
absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text);

}  // namespace flopscope::daemon
