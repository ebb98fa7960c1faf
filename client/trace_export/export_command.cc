// `flopscope export` (see export_command.h).
#include "client/trace_export/export_command.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "client/connect/step_window.h"
#include "client/trace_export/chrome_writer.h"
#include "client/trace_export/perfetto_writer.h"
#include "client/trace_export/trace_file.h"

namespace flopscope::client {
namespace {

absl::StatusOr<v1::TraceRequest> TraceRequestFor(const ExportOptions& options) {
  v1::TraceRequest request;
  request.set_job_id(options.job_id);
  for (int rank : options.ranks) request.add_ranks(rank);
  absl::StatusOr<std::optional<StepWindow>> steps = ParseStepWindow(options.steps);
  if (!steps.ok()) return steps.status();
  if (steps->has_value()) {
    request.set_first_step((*steps)->first);
    if ((*steps)->last) request.set_last_step(*(*steps)->last);
  }
  return request;
}

absl::StatusOr<std::unique_ptr<TraceSink>> SinkFor(const std::string& format, TraceFile& file) {
  if (format == "perfetto") return std::make_unique<PerfettoWriter>(file);
  if (format == "chrome") return std::make_unique<ChromeWriter>(file);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown export format '", format, "' (use perfetto or chrome)"));
}

}  // namespace

void AddToSummary(const v1::TraceChunk& chunk, ExportSummary& summary) {
  if (!chunk.problem().empty()) {
    summary.problems.push_back(absl::StrCat("rank ", chunk.rank(), ": ", chunk.problem()));
    return;
  }
  if (!chunk.left_alone().empty()) {
    summary.left_alone.push_back(absl::StrCat("rank ", chunk.rank(), ": ", chunk.left_alone()));
  }
  if (chunk.has_session()) ++summary.sessions;
  summary.ranges += chunk.ranges_size();
  summary.activities += chunk.activities_size();
  for (const v1::TraceRange& range : chunk.ranges()) summary.flows += range.flows();
  summary.flows_left_out += chunk.flows_left_out();
  if (chunk.folded_range_events() > 0) {
    summary.folded_range_events += chunk.folded_range_events();
    ++summary.folded_ranks;
  }
}

namespace {

// Says what step folding kept out of the file, and how to keep it next time.
void PrintFolded(const ExportSummary& summary, std::ostream& out) {
  if (summary.folded_range_events == 0) return;
  out << "left out " << summary.folded_range_events << " range events of " << summary.folded_ranks
      << " rank(s), and the kernels they launched: those steps are folded into per-module "
         "rollups (flopscoped --keep-raw-steps keeps the newest steps raw); `flopscope report "
         "--steps` still covers them\n";
}

}  // namespace

absl::StatusOr<ExportSummary> ExportTrace(const DaemonClient& daemon,
                                          const ExportOptions& options) {
  absl::StatusOr<v1::TraceRequest> request = TraceRequestFor(options);
  if (!request.ok()) return request.status();
  if (options.output.empty() || options.output == "-") {
    return absl::InvalidArgumentError("export needs a file: -o FILE");
  }
  TraceFile file;
  absl::StatusOr<std::unique_ptr<TraceSink>> sink = SinkFor(options.format, file);
  if (!sink.ok()) return sink.status();
  if (absl::Status s = file.Open(options.output); !s.ok()) return s;
  ExportSummary summary;
  absl::Status status = daemon.GetTrace(*request, [&](const v1::TraceChunk& chunk) {
    AddToSummary(chunk, summary);
    return (*sink)->Add(chunk);
  });
  if (status.ok()) status = (*sink)->Finish();
  if (status.ok()) status = file.Close();
  if (!status.ok()) return status;
  summary.bytes = file.bytes_written();
  return summary;
}

void PrintSummary(const ExportSummary& summary, const ExportOptions& options, std::ostream& out) {
  for (const std::string& problem : summary.problems) out << "left out " << problem << "\n";
  for (const std::string& note : summary.left_alone) out << note << "\n";
  PrintFolded(summary, out);
  out << "wrote " << summary.ranges << " ranges and " << summary.activities << " GPU activities of "
      << summary.sessions << " process(es) to " << options.output << " (" << summary.bytes
      << " bytes)";
  if (summary.flows_left_out > 0) {
    out << "; " << summary.flows_left_out
        << " launches drawn without a flow (a range launched more than 4096 activities)";
  }
  out << "\n";
  out << (options.format == "chrome" ? "open it in chrome://tracing (Load) or at "
                                       "https://ui.perfetto.dev (Open trace file)\n"
                                     : "open it at https://ui.perfetto.dev (Open trace file)\n");
}

absl::Status ExportCommand(const ExportOptions& options, std::ostream& out) {
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<ExportSummary> summary = ExportTrace(daemon, options);
  if (!summary.ok()) return summary.status();
  PrintSummary(*summary, options, out);
  return absl::OkStatus();
}

}  // namespace flopscope::client
