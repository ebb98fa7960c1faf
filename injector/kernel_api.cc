#include "injector/kernel_api.h"

#include "injector/session.h"

namespace flopscope::injector {

RangeContext CurrentRangeContext() noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return {};
  try {
    return session->tracker().CurrentContext();
  } catch (...) {
    return {};
  }
}

uint32_t InternKernelName(std::string_view name) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  try {
    return session->strings().Intern(name);
  } catch (...) {
    return 0;
  }
}

bool EnqueueKernelRecord(const KernelRecord& r) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return false;
  try {
    fs_kernel kernel{};
    kernel.correlation_id = r.correlation_id;
    kernel.path_id = r.path_id;
    kernel.range_instance_id = r.range_instance_id;
    kernel.name_id = r.name_id;
    kernel.device_id = r.device_id;
    kernel.context_id = r.context_id;
    kernel.stream_id = r.stream_id;
    kernel.start_ns = r.start_ns;
    kernel.end_ns = r.end_ns;
    kernel.grid_x = r.grid_x;
    kernel.grid_y = r.grid_y;
    kernel.grid_z = r.grid_z;
    kernel.block_x = r.block_x;
    kernel.block_y = r.block_y;
    kernel.block_z = r.block_z;
    kernel.kind = r.kind;
    kernel.bytes = r.bytes;
    kernel.graph_id = r.graph_id;
    kernel.graph_node_id = r.graph_node_id;
    kernel.flops = nullptr;  // counter windows come with the FLOPs work
    return session->tracker().AppendKernel(kernel);
  } catch (...) {
    return false;
  }
}

void CountCuptiDropped(uint64_t records) noexcept {
  if (Session* session = Session::Current()) {
    session->losses().Add(LossCause::kCuptiDropped, records);
  }
}

}  // namespace flopscope::injector
