#include "importer/import_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/endpoint.h"
#include "common/job_id.h"
#include "common/tls/grpc_credentials.h"
#include "importer/batch_stream.h"
#include "importer/collector_sender.h"
#include "importer/import_assembler.h"
#include "importer/progress_bar.h"
#include "importer/rank_assignment.h"
#include "importer/trace_reader.h"

namespace flopscope::importer {
namespace {

// Files smaller than this read too fast for a progress bar to be worth drawing.
constexpr uint64_t kProgressMinBytes = uint64_t{16} << 20;
// Bounds one file's whole stream. Generous: a large file is one long stream, and each batch waits
// for its commit; only a daemon that has stopped answering gets near it.
constexpr absl::Duration kStreamTimeout = absl::Hours(2);

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

absl::StatusOr<TraceRecording> ReadWithProgress(const std::string& path, bool progress) {
  const bool draw = progress && isatty(STDERR_FILENO) && FileSize(path) >= kProgressMinBytes;
  ProgressBar bar(std::cerr, path, draw);
  return ReadTrace(path, [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); });
}

struct SendResult {
  uint64_t batches_sent = 0;
  bool already_stored = false;
};

// Sends one plan as one session, skipping the batches the daemon already committed.
absl::StatusOr<SendResult> Send(const ImportPlan& plan, const std::string& target,
                                const std::optional<tls::TlsPem>& tls) {
  absl::StatusOr<std::unique_ptr<CollectorSender>> sender =
      CollectorSender::Connect(target, tls::ClientCredentials(tls), plan.hello, kStreamTimeout);
  if (!sender.ok()) return sender.status();
  SendResult result;
  const uint64_t committed = (*sender)->committed_seq();
  BatchStream batches(plan);
  v1::Batch batch;
  while (batches.Next(&batch)) {
    if (batch.seq() <= committed) continue;
    if (absl::Status s = (*sender)->Send(batch); !s.ok()) return s;
    ++result.batches_sent;
  }
  if (absl::Status s = (*sender)->Finish(); !s.ok()) return s;
  result.already_stored = result.batches_sent == 0 && committed > 0;
  return result;
}

std::string SummaryLine(const std::string& file, const std::string& job, const RankChoice& rank,
                        const ImportPlan& plan, const SendResult& sent) {
  const ImportCounts& c = plan.counts;
  const std::string attributed =
      c.kernels == 0
          ? std::string("no kernels to attribute")
          : absl::StrFormat("%.1f%% attributed", 100.0 * static_cast<double>(c.attributed_kernels) /
                                                     static_cast<double>(c.kernels));
  std::string line =
      absl::StrCat(file, ": job ", job, " rank ", rank.rank, rank.assumed ? " (assumed)" : "", ": ",
                   c.ranges, " ranges, ", c.kernels, " kernels (", c.memcpys, " memcpy, ",
                   c.memsets, " memset), ", attributed);
  if (c.kernels_with_flops > 0) {
    absl::StrAppend(&line, absl::StrFormat(", %d kernels with counted FLOPs (%.4g FLOP)",
                                           c.kernels_with_flops, c.flops));
  }
  if (sent.already_stored) absl::StrAppend(&line, " [already imported: nothing sent]");
  return line;
}

absl::Status WithFile(const std::string& file, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(file, ": ", status.message()));
}

absl::StatusOr<std::vector<TraceRecording>> ReadAll(const ImportOptions& options) {
  std::vector<TraceRecording> recordings;
  for (const std::string& file : options.files) {
    absl::StatusOr<TraceRecording> recording = ReadWithProgress(file, options.progress);
    if (!recording.ok()) return recording.status();
    recordings.push_back(*std::move(recording));
  }
  return recordings;
}

// Files before `failed` are stored completely; sessions are idempotent, so running the same
// command again skips them and resumes this one where the daemon stopped it.
absl::Status SendError(const std::vector<std::string>& files, size_t failed,
                       const absl::Status& status) {
  const std::string stored = failed == 0
                                 ? std::string()
                                 : absl::StrCat(" (the ", failed,
                                                " file(s) before it were imported; running the "
                                                "command again skips them)");
  return absl::Status(status.code(), absl::StrCat(files[failed], ": ", status.message(), stored));
}

}  // namespace

std::string DefaultImportJobId(const std::string& first_file) {
  std::string name = first_file.substr(first_file.find_last_of('/') + 1);
  for (const char* suffix : {".gz", ".json", ".sqlite", ".trace", ".pt"}) {
    if (absl::EndsWith(name, suffix) && name.size() > strlen(suffix)) {
      name.resize(name.size() - strlen(suffix));
    }
  }
  return SanitizeJobId(absl::StrCat("import-", name));
}

absl::Status RunImport(const ImportOptions& options, std::ostream& out) {
  if (options.files.empty()) return absl::InvalidArgumentError("no files to import");
  const std::string job =
      options.job.empty() ? DefaultImportJobId(options.files.front()) : options.job;
  if (const std::string problem = JobIdProblem(job); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--job: ", problem));
  }
  // Read and check everything first: a malformed file must not leave half an import behind.
  absl::StatusOr<std::vector<TraceRecording>> recordings = ReadAll(options);
  if (!recordings.ok()) return recordings.status();
  std::vector<std::optional<int32_t>> recorded_ranks;
  for (const TraceRecording& recording : *recordings) recorded_ranks.push_back(recording.rank);
  absl::StatusOr<std::vector<RankChoice>> ranks =
      AssignRanks(options.files, recorded_ranks, options.rank);
  if (!ranks.ok()) return ranks.status();
  std::vector<ImportPlan> plans;
  for (size_t i = 0; i < recordings->size(); ++i) {
    absl::StatusOr<ImportPlan> plan = ImportAssembler::Assemble(
        std::move((*recordings)[i]), {job, (*ranks)[i].rank, absl::Now()});
    if (!plan.ok()) return WithFile(options.files[i], plan.status());
    plans.push_back(*std::move(plan));
  }
  const std::string target =
      GrpcTarget(options.socket.empty() ? DefaultSocketPath() : options.socket);
  for (size_t i = 0; i < plans.size(); ++i) {
    absl::StatusOr<SendResult> sent = Send(plans[i], target, options.tls);
    if (!sent.ok()) return SendError(options.files, i, sent.status());
    out << SummaryLine(options.files[i], job, (*ranks)[i], plans[i], *sent) << "\n";
    plans[i] = ImportPlan();  // free its records before the next file is sent
  }
  return absl::OkStatus();
}

}  // namespace flopscope::importer
