// Fuzzes ParseMetadataMark, which reads the text of any mark in the `flopscope` NVTX domain:
// whatever code runs in the profiled job may write it, so it is untrusted. The check reaches
// across the seam: an entry the injector keeps must be one the daemon's validator accepts as a
// Metadata record, or the whole batch carrying it (ranges and kernels included) is rejected.
// This fuzzer may include daemon/ (fuzzers are not production code of the injector core).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/utf8.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/parallel_mark.h"
#include "daemon/validate/session_definitions.h"
#include "flopscope/v1/records.pb.h"
#include "injector/ranges/metadata_mark.h"

namespace {

// What the injector cuts to, the daemon must accept.
static_assert(flopscope::injector::kMaxMetadataKeyBytes <= flopscope::daemon::kMaxMetadataKeyBytes);
static_assert(flopscope::injector::kMaxMetadataBytes <= flopscope::daemon::kMaxMetadataValueBytes);

// Fixed clocks keep a crash reproducible: the mark's time, and the daemon's "now" a day later.
constexpr int64_t kMarkNs = 1'800'000'000LL * 1'000'000'000LL;
const absl::Time kNow = absl::FromUnixNanos(kMarkNs) + absl::Hours(24);

void CheckAcceptedByDaemon(const flopscope::injector::MetadataEntry& entry) {
  flopscope::v1::Batch batch;
  batch.set_seq(1);
  flopscope::v1::Metadata* metadata = batch.add_metadata();
  metadata->set_key(entry.key);
  metadata->set_value(entry.value);
  metadata->set_time_ns(kMarkNs);
  const flopscope::daemon::SessionDefinitions known;
  flopscope::daemon::SessionDefinitions added;
  const absl::Status status =
      flopscope::daemon::BatchValidator(known, kNow).Validate(batch, &added);
  if (!status.ok()) {
    std::fprintf(stderr, "the daemon refuses a mark the injector kept: %s\n",
                 std::string(status.message()).c_str());
    std::abort();
  }
  if (entry.key == flopscope::daemon::kParallelKey) {
    flopscope::daemon::ParseParallelMark(entry.value).IgnoreError();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // NVTX hands the injector a C string: nothing after a NUL ever reaches the parser.
  text = text.substr(0, text.find('\0'));
  const std::optional<flopscope::injector::MetadataEntry> entry =
      flopscope::injector::ParseMetadataMark(text);
  if (!entry.has_value()) return 0;
  if (entry->key.empty() || !flopscope::IsValidUtf8(entry->key) ||
      !flopscope::IsValidUtf8(entry->value)) {
    std::abort();
  }
  CheckAcceptedByDaemon(*entry);
  return 0;
}
