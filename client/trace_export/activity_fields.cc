// Record fields shared by the export formats (see activity_fields.h).
#include "client/trace_export/activity_fields.h"

#include "absl/strings/str_cat.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::client {

bool IsStepOrPhase(const TraceDefinitions::Path& path) { return path.domain == kFlopscopeDomain; }

std::string ProcessName(const v1::TraceChunk& chunk) {
  const v1::TraceSession& session = chunk.session();
  return absl::StrCat("rank ", chunk.rank(), " (", session.host(),
                      session.host().empty() ? "" : ", ", "pid ", session.pid(), ")");
}

std::string StreamName(const v1::KernelRecord& kernel) {
  return absl::StrCat("GPU ", kernel.device_id(), " stream ", kernel.stream_id());
}

std::string LaneName(const std::string& name, uint32_t lane) {
  return lane == 0 ? name : absl::StrCat(name, " (overlap ", lane, ")");
}

double TotalFlops(const v1::FlopCounters& flops) {
  double total = flops.fp64() + flops.fp32() + flops.fp16();
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) total += tensor.flops();
  return total;
}

std::optional<double> FlopsPerSecond(const v1::TraceActivity& activity) {
  const int64_t duration_ns = activity.kernel().end_ns() - activity.kernel().start_ns();
  if (!activity.has_flops() || duration_ns <= 0) return std::nullopt;
  return TotalFlops(activity.flops()) * 1e9 / static_cast<double>(duration_ns);
}

void ForEachActivityField(
    const v1::TraceActivity& activity,
    const std::function<void(const std::string& name, const ActivityValue& value)>& on_field) {
  const v1::KernelRecord& kernel = activity.kernel();
  if (kernel.kind() == v1::ACTIVITY_KIND_KERNEL) {
    on_field("grid", absl::StrCat(kernel.grid_x(), ",", kernel.grid_y(), ",", kernel.grid_z()));
    on_field("block", absl::StrCat(kernel.block_x(), ",", kernel.block_y(), ",", kernel.block_z()));
  } else {
    on_field("bytes", kernel.bytes());
  }
  if (kernel.graph_id() != 0) on_field("graph", kernel.graph_id());
  if (kernel.counted()) on_field("counted", uint64_t{1});
  if (!activity.has_flops()) return;
  const v1::FlopCounters& flops = activity.flops();
  on_field("flops", TotalFlops(flops));
  if (flops.fp64() != 0) on_field("flops:fp64", flops.fp64());
  if (flops.fp32() != 0) on_field("flops:fp32", flops.fp32());
  if (flops.fp16() != 0) on_field("flops:fp16", flops.fp16());
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) {
    if (tensor.flops() != 0)
      on_field(absl::StrCat("flops:tensor:", tensor.source()), tensor.flops());
  }
}

}  // namespace flopscope::client
