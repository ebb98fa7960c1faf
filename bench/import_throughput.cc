// Import throughput: how fast a Kineto trace goes from disk into the daemon, and where the time
// goes. Prints figures from one run (best of three for the reading stages), no pass/fail:
//   split     ByteSource (gunzip) + JsonEventSplitter, events only counted
//   dom       + simdjson DOM parse of every event (what the importer does: full validation)
//   ondemand  + simdjson On-Demand reading only ph/cat/name/ts (the alternative, for comparison)
//   read      the importer's whole reader (ReadTrace: DOM + field extraction into the recording)
//   assemble  attribution, time base, batches encoded (no I/O)
//   import    RunImport into an in-process flopscoped (temporary socket and data dir)
// MB/s are of decompressed JSON; events/s count every trace event.
//
//   import_throughput [FILE]   default: the largest .json.gz under FLOPSCOPE_SHARED_DATA_DIR
#include <simdjson.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "bench/report_bench_jobs.h"
#include "daemon/server/daemon_server.h"
#include "importer/batch_stream.h"
#include "importer/byte_source.h"
#include "importer/import_assembler.h"
#include "importer/import_command.h"
#include "importer/json_event_splitter.h"
#include "importer/trace_reader.h"

namespace flopscope::importer {
namespace {

namespace fs = std::filesystem;

std::string LargestFixture() {
  const char* env = std::getenv("FLOPSCOPE_SHARED_DATA_DIR");
  const fs::path root = env != nullptr && *env != '\0' ? env : FLOPSCOPE_SHARED_DATA_DIR;
  std::string best;
  uintmax_t best_size = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const std::string path = it->path().string();
    if (!it->is_regular_file() || path.size() < 8 || path.substr(path.size() - 8) != ".json.gz") {
      continue;
    }
    if (it->file_size() > best_size) {
      best_size = it->file_size();
      best = path;
    }
  }
  return best;
}

// Counts events, and optionally parses each with `parse`.
class Counting final : public JsonTraceVisitor {
 public:
  explicit Counting(std::function<void(absl::string_view)> parse) : parse_(std::move(parse)) {}
  absl::Status OnEvent(absl::string_view json, uint64_t) override {
    ++events;
    if (parse_) parse_(json);
    return absl::OkStatus();
  }
  absl::Status OnMember(absl::string_view, absl::string_view, uint64_t) override {
    return absl::OkStatus();
  }
  uint64_t events = 0;

 private:
  std::function<void(absl::string_view)> parse_;
};

struct Pass {
  double seconds = 0;
  uint64_t bytes = 0;
  uint64_t events = 0;
};

Pass Split(const std::string& path, std::function<void(absl::string_view)> parse) {
  const auto start = std::chrono::steady_clock::now();
  auto source = ByteSource::Open(path);
  Counting visitor(std::move(parse));
  JsonEventSplitter splitter(source->get(), &visitor);
  if (absl::Status s = splitter.Run(); !s.ok()) std::cerr << "split failed: " << s << "\n";
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return {took.count(), (*source)->bytes_delivered(), visitor.events};
}

Pass BestOfThree(const std::function<Pass()>& run) {
  Pass best = run();
  for (int i = 0; i < 2; ++i) {
    const Pass pass = run();
    if (pass.seconds < best.seconds) best = pass;
  }
  return best;
}

void Print(const char* stage, const Pass& pass, uint64_t events) {
  std::printf("  %-9s %8.3f s  %8.1f MB/s  %10.0f events/s\n", stage, pass.seconds,
              static_cast<double>(pass.bytes) / pass.seconds / 1e6,
              static_cast<double>(events) / pass.seconds);
}

long PeakRssMb() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

int Run(const std::string& path) {
  if (path.empty()) {
    std::cerr << "no trace given and no .json.gz under the shared data directory\n";
    return 2;
  }
  std::printf("import_throughput: %s (%.1f MB on disk)\n", path.c_str(),
              static_cast<double>(fs::file_size(path)) / 1e6);
  const Pass split = BestOfThree([&] { return Split(path, nullptr); });
  std::printf("  %llu events, %.1f MB of JSON\n", static_cast<unsigned long long>(split.events),
              static_cast<double>(split.bytes) / 1e6);
  Print("split", split, split.events);

  simdjson::dom::parser dom;
  std::vector<char> padded;
  const Pass with_dom = BestOfThree([&] {
    return Split(path, [&](absl::string_view json) {
      padded.resize(json.size() + simdjson::SIMDJSON_PADDING);
      std::memcpy(padded.data(), json.data(), json.size());
      simdjson::dom::element element;
      if (dom.parse(padded.data(), json.size(), false).get(element) != simdjson::SUCCESS) {
        std::cerr << "invalid event\n";
      }
    });
  });
  Print("dom", with_dom, split.events);

  simdjson::ondemand::parser ondemand;
  uint64_t fields_found = 0;  // keeps the reads from being optimised away
  const Pass with_ondemand = BestOfThree([&] {
    return Split(path, [&](absl::string_view json) {
      padded.resize(json.size() + simdjson::SIMDJSON_PADDING);
      std::memcpy(padded.data(), json.data(), json.size());
      simdjson::ondemand::document doc;
      if (ondemand.iterate(padded.data(), json.size(), padded.size()).get(doc)) return;
      std::string_view text;
      size_t found = 0;
      for (const char* key : {"ph", "cat", "name"}) {
        found += doc[key].get_string().get(text) == simdjson::SUCCESS ? 1 : 0;
      }
      found += doc["ts"].raw_json_token().get(text) == simdjson::SUCCESS ? 1 : 0;
      fields_found += found;
    });
  });
  Print("ondemand", with_ondemand, split.events);
  if (fields_found == 0) std::cerr << "On-Demand found no fields\n";

  const long rss_before = PeakRssMb();
  Pass read;
  absl::StatusOr<TraceRecording> recording;
  read = BestOfThree([&] {
    const auto start = std::chrono::steady_clock::now();
    recording = ReadTrace(path, nullptr);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return Pass{took.count(), split.bytes, split.events};
  });
  if (!recording.ok()) {
    std::cerr << recording.status() << "\n";
    return 1;
  }
  Print("read", read, split.events);

  const auto assemble_start = std::chrono::steady_clock::now();
  absl::StatusOr<ImportPlan> plan =
      ImportAssembler::Assemble(*std::move(recording), {"bench", 0, absl::Now()});
  if (!plan.ok()) {
    std::cerr << plan.status() << "\n";
    return 1;
  }
  BatchStream batches(*plan);
  v1::Batch batch;
  uint64_t records = 0;
  uint64_t encoded = 0;
  while (batches.Next(&batch)) {
    records += batch.strings_size() + batch.paths_size() + batch.ranges_size() +
               batch.kernels_size() + batch.metadata_size();
    encoded += batch.SerializeAsString().size();
  }
  const std::chrono::duration<double> assembled = std::chrono::steady_clock::now() - assemble_start;
  std::printf("  %-9s %8.3f s  %llu records (%.1f MB encoded), %.0f records/s\n", "assemble",
              assembled.count(), static_cast<unsigned long long>(records), encoded / 1e6,
              static_cast<double>(records) / assembled.count());
  std::printf("  peak RSS %ld MB after reading (%ld MB before)\n", PeakRssMb(), rss_before);

  char dir_template[] = "/tmp/flopscope-bench-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  auto server = bench::StartBenchDaemon(dir);
  if (!server.ok()) {
    std::cerr << server.status() << "\n";
    return 1;
  }
  ImportOptions import;
  import.files = {path};
  import.job = "bench";
  import.socket = (*server)->options().socket_path;
  import.progress = false;
  std::ostringstream summary;
  const auto import_start = std::chrono::steady_clock::now();
  const absl::Status imported = RunImport(import, summary);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - import_start;
  (*server)->Shutdown();
  fs::remove_all(dir);
  if (!imported.ok()) {
    std::cerr << imported << "\n";
    return 1;
  }
  Print("import", Pass{took.count(), split.bytes, split.events}, split.events);
  std::printf("  %s", summary.str().c_str());
  std::printf("  ratios: dom/split %.2f, ondemand/dom %.2f, import/read %.2f\n\n",
              with_dom.seconds / split.seconds, with_ondemand.seconds / with_dom.seconds,
              took.count() / read.seconds);
  return 0;
}

}  // namespace
}  // namespace flopscope::importer

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : flopscope::importer::LargestFixture();
  return flopscope::importer::Run(path);
}
