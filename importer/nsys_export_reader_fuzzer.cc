// Fuzzes NsysExportReader over an arbitrary file opened as an Nsight Systems SQLite export
// (trace files come from anywhere: untrusted). SQLite itself is robust against corrupt files;
// the target is our reading code: table and column lookups across schema versions, NULLs and
// values of the wrong type, ids that point nowhere. The assembler then nests what was read.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "importer/import_assembler.h"
#include "importer/nsys_export_reader.h"
#include "importer/testing/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace importer = flopscope::importer;
  const std::string& path = importer::testing::FuzzInputFile::Write(data, size);
  absl::StatusOr<importer::TraceRecording> recording =
      importer::NsysExportReader::Read(path, importer::ProgressCallback());
  if (!recording.ok()) return 0;
  importer::AssemblyOptions options;
  options.job_id = "fuzz";
  options.now = absl::FromUnixSeconds(1'893'456'000);  // fixed: reproducible on any day
  importer::ImportAssembler::Assemble(*std::move(recording), options).IgnoreError();
  return 0;
}
