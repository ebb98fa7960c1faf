#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/connect/daemon_client.h"

namespace flopscope::client {

// `flopscope export JOB [--rank R]... [--steps A:B] --format perfetto|chrome -o FILE`: the job's
// timeline (Query.GetTrace) streamed into a Perfetto protobuf trace or a Chrome trace-event JSON
// file (perfetto_writer.h, chrome_writer.h), written beside FILE and renamed into place.
struct ExportOptions {
  std::string job_id;
  std::vector<int> ranks;  // empty: every rank
  std::string steps;       // "A:B", "A:", ":B" or "A" (ParseStepWindow); empty: the whole run
  std::string format = "perfetto";
  std::string output;
  std::string socket;
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
};

// What an export wrote.
struct ExportSummary {
  uint64_t sessions = 0;  // processes (a rank that restarted has several)
  uint64_t ranges = 0;
  uint64_t activities = 0;
  uint64_t flows = 0;
  uint64_t flows_left_out = 0;  // activities of ranges with more than the daemon lists
  // Range events in the window that step folding packed (no timeline for them), and on how many
  // ranks.
  uint64_t folded_range_events = 0;
  uint64_t folded_ranks = 0;
  uint64_t bytes = 0;
  std::vector<std::string> problems;  // ranks whose file could not be read
  // "rank N: <what was left alone, and where its records come from>" (TraceChunk.left_alone)
  std::vector<std::string> left_alone;
};

// Adds what `chunk` holds to `summary` (a rank's unreadable file, records, folded events).
void AddToSummary(const v1::TraceChunk& chunk, ExportSummary& summary);

// The lines the command prints after an export: problems, what folding left out, what was
// written, and how to open it.
void PrintSummary(const ExportSummary& summary, const ExportOptions& options, std::ostream& out);

// Exports through `daemon`. INVALID_ARGUMENT for a bad format or step window; the daemon's own
// errors (unknown job or rank) pass through.
absl::StatusOr<ExportSummary> ExportTrace(const DaemonClient& daemon, const ExportOptions& options);

// The command: exports and prints one line saying what was written and how to open it ("open it
// at https://ui.perfetto.dev", or chrome://tracing), and a line per unreadable rank.
absl::Status ExportCommand(const ExportOptions& options, std::ostream& out);

}  // namespace flopscope::client
