// Fuzzes the daemon's first look at a producer's bytes (records.proto: everything a session sends
// is untrusted input): a v1::Batch parsed from arbitrary bytes goes to BatchValidator, which must
// accept or reject it without crashing, reading out of bounds or tripping UBSan.
//
// Twice, as a session's next batch would be checked: the second pass runs against the
// definitions the first pass added. Repeating a definition with identical content is allowed, so
// an accepted batch must be accepted again and define nothing new; every rejection must name its
// rule (RejectedRule), which is what the daemon counts rejections by.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/parallel_mark.h"
#include "daemon/validate/session_definitions.h"
#include "flopscope/v1/records.pb.h"
#include "google/protobuf/stubs/logging.h"

namespace flopscope::daemon {
namespace {

// A fixed clock keeps a crash reproducible on any day (2030-01-01T00:00:00Z), and the session
// started on 2025-01-01T00:00:00Z (its hello's start_time_ns), before the seeds' records.
const absl::Time kNow = absl::FromUnixSeconds(1'893'456'000);
constexpr int64_t kSessionStartNs = 1'735'689'600LL * 1'000'000'000LL;

// A rejection must be INVALID_ARGUMENT carrying the rule it broke.
void CheckRejection(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (RejectedRule(status) == "other") std::abort();
}

// What the collector does next with an accepted batch: `parallel` marks set the rank's layout.
void ParseParallelMarks(const v1::Batch& batch) {
  for (const v1::Metadata& entry : batch.metadata()) {
    if (entry.key() == kParallelKey) ParseParallelMark(entry.value()).IgnoreError();
  }
}

void Run(const v1::Batch& batch) {
  const SessionDefinitions empty;
  SessionDefinitions first;
  const absl::Status status = BatchValidator(empty, kNow, kSessionStartNs).Validate(batch, &first);
  if (!status.ok()) {
    CheckRejection(status);
    return;
  }
  ParseParallelMarks(batch);

  SessionDefinitions known;
  known.Merge(first);
  SessionDefinitions second;
  const absl::Status again = BatchValidator(known, kNow, kSessionStartNs).Validate(batch, &second);
  // The per-session limits count the known definitions plus the batch's; twice a batch near
  // them may legitimately exceed them.
  const bool within_limits =
      known.path_count() + static_cast<size_t>(batch.paths_size()) <= kMaxPathsPerSession &&
      known.string_count() + static_cast<size_t>(batch.strings_size()) <= kMaxStringsPerSession;
  if (!again.ok()) {
    CheckRejection(again);
    if (within_limits) std::abort();  // accepted once, refused when repeated
    return;
  }
  if (second.path_count() != 0 || second.string_count() != 0) std::abort();
}

}  // namespace
}  // namespace flopscope::daemon

// Invalid UTF-8 in a string field is refused by the parser with a log line per input: noise.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flopscope::v1::Batch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  flopscope::daemon::Run(batch);
  return 0;
}
