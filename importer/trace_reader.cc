#include "importer/trace_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "importer/kineto_trace_reader.h"
#include "importer/nsys_export_reader.h"

namespace flopscope::importer {
namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // followed by a NUL in the file

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  char head[64] = {};
  const size_t got = std::fread(head, 1, sizeof head, file);
  std::fclose(file);
  if (got >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
      static_cast<unsigned char>(head[1]) == 0x8b) {
    return TraceFormat::kKinetoJson;
  }
  if (got >= sizeof kSqliteMagic && std::memcmp(head, kSqliteMagic, sizeof kSqliteMagic) == 0) {
    return TraceFormat::kNsysSqlite;
  }
  size_t i = 0;
  if (got >= 3 && std::memcmp(head, "\xEF\xBB\xBF", 3) == 0) i = 3;  // a UTF-8 byte order mark
  while (i < got && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) {
    ++i;
  }
  if (i < got && (head[i] == '{' || head[i] == '[')) return TraceFormat::kKinetoJson;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ", got == 0 ? "the file is empty" : "not a trace flopscope can import",
      " (expected a Kineto / PyTorch-profiler JSON trace, .json or .json.gz, or an Nsight "
      "Systems SQLite export)"));
}

absl::StatusOr<TraceRecording> ReadTrace(const std::string& path,
                                         const ProgressCallback& progress) {
  absl::StatusOr<TraceFormat> format = DetectTraceFormat(path);
  if (!format.ok()) return format.status();
  absl::StatusOr<TraceRecording> recording = *format == TraceFormat::kNsysSqlite
                                                 ? NsysExportReader::Read(path, progress)
                                                 : ReadKinetoTrace(path, progress);
  if (!recording.ok()) return WithPath(path, recording.status());
  return recording;
}

}  // namespace flopscope::importer
