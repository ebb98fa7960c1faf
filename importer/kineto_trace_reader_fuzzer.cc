// Fuzzes the whole Kineto / PyTorch-profiler reading path of `flopscope import` (trace files come
// from anywhere: untrusted): bytes -> temporary file -> ReadKinetoTrace (ByteSource,
// JsonEventSplitter, simdjson per event, the header's members) -> ImportAssembler, which nests
// the ranges, joins counter samples and picks the time base. Failing with a status is fine;
// crashing, reading out of bounds or undefined behaviour is not.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "importer/import_assembler.h"
#include "importer/kineto_trace_reader.h"
#include "importer/testing/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace importer = flopscope::importer;
  const std::string& path = importer::testing::FuzzInputFile::Write(data, size);
  absl::StatusOr<importer::TraceRecording> recording =
      importer::ReadKinetoTrace(path, importer::ProgressCallback());
  if (!recording.ok()) return 0;
  importer::AssemblyOptions options;
  options.job_id = "fuzz";
  options.now = absl::FromUnixSeconds(1'893'456'000);  // fixed: reproducible on any day
  importer::ImportAssembler::Assemble(*std::move(recording), options).IgnoreError();
  return 0;
}
