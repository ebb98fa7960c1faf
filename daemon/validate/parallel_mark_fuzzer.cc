// Fuzzes ParseParallelMark, which reads the value of a `parallel` metadata mark: text any
// process in the job may write through NVTX, so untrusted. Besides not crashing, an accepted
// layout must hold what the header promises: sizes of at least 1, each coordinate inside its
// size, source "nvtx".

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/validate/parallel_mark.h"
#include "flopscope/v1/records.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view value(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<flopscope::v1::ParallelLayout> layout =
      flopscope::daemon::ParseParallelMark(value);
  if (!layout.ok()) {
    if (!absl::IsInvalidArgument(layout.status())) std::abort();
    return 0;
  }
  if (layout->tp_size() == 0 || layout->pp_size() == 0 || layout->dp_size() == 0) std::abort();
  if (layout->tp_rank() >= layout->tp_size() || layout->pp_rank() >= layout->pp_size() ||
      layout->dp_rank() >= layout->dp_size()) {
    std::abort();
  }
  if (layout->source() != "nvtx") std::abort();
  return 0;
}
