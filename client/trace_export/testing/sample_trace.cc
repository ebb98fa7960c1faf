// The export writers' test trace (see sample_trace.h).
#include "client/trace_export/testing/sample_trace.h"

namespace flopscope::client::testing {
namespace {

void AddPath(v1::TraceChunk& chunk, uint64_t id, uint64_t parent, const char* domain,
             const char* name) {
  v1::RangePath& path = *chunk.add_paths();
  path.set_id(id);
  path.set_parent_id(parent);
  path.set_domain(domain);
  path.set_name(name);
}

v1::TraceRange& AddRange(v1::TraceChunk& chunk, uint64_t path, uint64_t instance, uint64_t parent,
                         int64_t start, int64_t end) {
  v1::TraceRange& range = *chunk.add_ranges();
  v1::RangeEvent& event = *range.mutable_event();
  event.set_path_id(path);
  event.set_instance_id(instance);
  event.set_parent_instance_id(parent);
  event.set_thread_id(11);
  event.set_start_ns(start);
  event.set_end_ns(end);
  event.set_kind(v1::RANGE_KIND_PUSH_POP);
  return range;
}

v1::TraceActivity& AddActivity(v1::TraceChunk& chunk, uint64_t key, uint64_t path,
                               uint64_t instance, int64_t start, int64_t end) {
  v1::TraceActivity& activity = *chunk.add_activities();
  activity.set_key(key);
  activity.set_flow(instance != 0);
  v1::KernelRecord& kernel = *activity.mutable_kernel();
  kernel.set_correlation_id(key * 100);
  kernel.set_path_id(path);
  kernel.set_range_instance_id(instance);
  kernel.set_name_id(1);
  kernel.set_stream_id(7);
  kernel.set_start_ns(start);
  kernel.set_end_ns(end);
  kernel.set_kind(v1::ACTIVITY_KIND_KERNEL);
  kernel.set_grid_x(4);
  kernel.set_grid_y(1);
  kernel.set_grid_z(1);
  kernel.set_block_x(128);
  kernel.set_block_y(1);
  kernel.set_block_z(1);
  return activity;
}

}  // namespace

std::vector<v1::TraceChunk> SampleTrace() {
  constexpr int64_t kT0 = 1'700'000'000'000'000'000;
  v1::TraceChunk definitions;
  definitions.set_rank(0);
  definitions.set_session_index(1);
  v1::TraceSession& session = *definitions.mutable_session();
  session.set_session_id("node1-4242-1");
  session.set_host("node1");
  session.set_pid(4242);
  session.set_command("train.py");
  session.set_start_time_ns(kT0);
  AddPath(definitions, 1, 0, "", "model");
  AddPath(definitions, 2, 1, "", "layer");
  AddPath(definitions, 3, 0, "flopscope", "step");
  v1::StringDef& name = *definitions.add_strings();
  name.set_id(1);
  name.set_value("gemm_kernel");

  v1::TraceChunk records;
  records.set_rank(0);
  records.set_session_index(1);
  AddActivity(records, 12, 0, 0, kT0 + 500, kT0 + 700);
  AddRange(records, 3, 1, 0, kT0 + 1000, kT0 + 9000);
  AddRange(records, 1, 2, 0, kT0 + 1100, kT0 + 8000).set_flows(1);
  AddRange(records, 2, 3, 2, kT0 + 1200, kT0 + 5000).set_flows(1);
  v1::TraceActivity& gemm = AddActivity(records, 10, 2, 3, kT0 + 2000, kT0 + 3000);
  gemm.mutable_kernel()->set_counted(true);
  gemm.mutable_flops()->set_fp32(1e6);
  v1::KernelRecord& copy = *AddActivity(records, 11, 1, 2, kT0 + 6000, kT0 + 6500).mutable_kernel();
  copy.set_kind(v1::ACTIVITY_KIND_MEMCPY);
  copy.set_name_id(0);
  copy.set_bytes(4096);
  return {definitions, records};
}

}  // namespace flopscope::client::testing
