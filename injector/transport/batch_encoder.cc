#include "injector/transport/batch_encoder.h"

#include <map>
#include <string>

#include "common/version.h"

namespace flopscope::transport {
namespace {

// The ABI's named values (transport_abi.h) are the proto's, number for number: the encoder casts
// one to the other. A proto change that breaks this must change the ABI (and its version) too.
template <typename Abi, typename Proto>
constexpr bool SameValue(Abi abi, Proto proto) {
  return static_cast<int>(abi) == static_cast<int>(proto);
}
static_assert(SameValue(FS_RANGE_KIND_PUSH_POP, v1::RANGE_KIND_PUSH_POP));
static_assert(SameValue(FS_RANGE_KIND_START_END, v1::RANGE_KIND_START_END));
static_assert(SameValue(FS_ACTIVITY_KIND_KERNEL, v1::ACTIVITY_KIND_KERNEL));
static_assert(SameValue(FS_ACTIVITY_KIND_MEMCPY, v1::ACTIVITY_KIND_MEMCPY));
static_assert(SameValue(FS_ACTIVITY_KIND_MEMSET, v1::ACTIVITY_KIND_MEMSET));
static_assert(SameValue(FS_LOSS_BUFFER_FULL, v1::LOSS_CAUSE_BUFFER_FULL));
static_assert(SameValue(FS_LOSS_DAEMON_UNREACHABLE, v1::LOSS_CAUSE_DAEMON_UNREACHABLE));
static_assert(SameValue(FS_LOSS_REJECTED, v1::LOSS_CAUSE_REJECTED));
static_assert(SameValue(FS_LOSS_UNMATCHED_POP, v1::LOSS_CAUSE_UNMATCHED_POP));
static_assert(SameValue(FS_LOSS_STACK_OVERFLOW, v1::LOSS_CAUSE_STACK_OVERFLOW));
static_assert(SameValue(FS_LOSS_TOO_MANY_PATHS, v1::LOSS_CAUSE_TOO_MANY_PATHS));
static_assert(SameValue(FS_LOSS_UNCLOSED_RANGE, v1::LOSS_CAUSE_UNCLOSED_RANGE));
static_assert(SameValue(FS_LOSS_CUPTI_DROPPED, v1::LOSS_CAUSE_CUPTI_DROPPED));
static_assert(SameValue(FS_LOSS_EXIT_UNDELIVERED, v1::LOSS_CAUSE_EXIT_UNDELIVERED));
static_assert(SameValue(FS_LOSS_COUNTER_UNMATCHED, v1::LOSS_CAUSE_COUNTER_UNMATCHED));
static_assert(SameValue(FS_LOSS_NOT_ARRIVED, v1::LOSS_CAUSE_NOT_ARRIVED));
static_assert(SameValue(FS_LOSS_ENDED_WITHOUT_FINAL, v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL));
static_assert(SameValue(FS_LOSS_KILLED, v1::LOSS_CAUSE_KILLED));
static_assert(SameValue(FS_LOSS_BACKLOG_FULL, v1::LOSS_CAUSE_BACKLOG_FULL));
static_assert(SameValue(FS_LOSS_FORWARD_DROPPED, v1::LOSS_CAUSE_FORWARD_DROPPED));
// Every cause the proto knows has an ABI name (a new cause must be added to both).
static_assert(SameValue(FS_LOSS_CAUSE_MAX, v1::LossCause_MAX));
static_assert(SameValue(FS_RANGE_KIND_START_END, v1::RangeKind_MAX));
static_assert(SameValue(FS_ACTIVITY_KIND_MEMSET, v1::ActivityKind_MAX));

std::string Str(fs_str text) {
  return text.data == nullptr ? std::string() : std::string(text.data, text.size);
}

void EncodeLayout(const fs_layout& layout, v1::ParallelLayout* out) {
  out->set_tp_size(layout.tp_size);
  out->set_pp_size(layout.pp_size);
  out->set_dp_size(layout.dp_size);
  out->set_tp_rank(layout.tp_rank);
  out->set_pp_rank(layout.pp_rank);
  out->set_dp_rank(layout.dp_rank);
  out->set_source(Str(layout.source));
}

void EncodeDevice(const fs_device& device, v1::Device* out) {
  out->set_index(device.index);
  out->set_name(Str(device.name));
  out->set_chip(Str(device.chip));
  out->set_uuid(Str(device.uuid));
  out->set_sm_count(device.sm_count);
  out->set_memory_bytes(device.memory_bytes);
  out->set_sm_clock_khz(device.sm_clock_khz);
  out->set_compute_capability(device.compute_capability);
}

void EncodeFlops(const fs_flop_counters& flops, v1::FlopCounters* out) {
  out->set_fp64(flops.fp64);
  out->set_fp32(flops.fp32);
  out->set_fp16(flops.fp16);
  for (uint32_t i = 0; i < flops.num_tensor; ++i) {
    auto* tensor = out->add_tensor();
    tensor->set_source(Str(flops.tensor[i].source));
    tensor->set_flops(flops.tensor[i].flops);
  }
  for (uint32_t i = 0; i < flops.num_raw; ++i) {
    auto* raw = out->add_raw();
    raw->set_metric(Str(flops.raw[i].metric));
    raw->set_value(flops.raw[i].value);
  }
}

void EncodeKernel(const fs_kernel& kernel, v1::KernelRecord* out) {
  out->set_correlation_id(kernel.correlation_id);
  out->set_path_id(kernel.path_id);
  out->set_range_instance_id(kernel.range_instance_id);
  out->set_name_id(kernel.name_id);
  out->set_device_id(kernel.device_id);
  out->set_context_id(kernel.context_id);
  out->set_stream_id(kernel.stream_id);
  out->set_start_ns(kernel.start_ns);
  out->set_end_ns(kernel.end_ns);
  out->set_grid_x(kernel.grid_x);
  out->set_grid_y(kernel.grid_y);
  out->set_grid_z(kernel.grid_z);
  out->set_block_x(kernel.block_x);
  out->set_block_y(kernel.block_y);
  out->set_block_z(kernel.block_z);
  out->set_kind(static_cast<v1::ActivityKind>(kernel.kind));
  out->set_bytes(kernel.bytes);
  out->set_graph_id(kernel.graph_id);
  out->set_graph_node_id(kernel.graph_node_id);
  out->set_counted(kernel.counted != 0);
}

void EncodeKernelFlops(const fs_kernel_flops& kernel, v1::KernelFlops* out) {
  out->set_correlation_id(kernel.correlation_id);
  out->set_path_id(kernel.path_id);
  out->set_range_instance_id(kernel.range_instance_id);
  out->set_name_id(kernel.name_id);
  out->set_device_id(kernel.device_id);
  out->set_phase_path_id(kernel.phase_path_id);
  out->set_counted_step(kernel.counted_step);
  EncodeFlops(kernel.flops, out->mutable_flops());
}

void EncodeWindow(const fs_counter_window& window, v1::CounterWindowRecord* out) {
  out->set_first_step(window.first_step);
  out->set_last_step(window.last_step);
  out->set_trigger(Str(window.trigger));
  out->set_metric_set(Str(window.metric_set));
  out->set_chip(Str(window.chip));
  out->set_passes(window.passes);
  out->set_kernels_counted(window.kernels_counted);
  out->set_ranges_unmatched(window.ranges_unmatched);
  out->set_comm_kernels_excluded(window.comm_kernels_excluded);
  out->set_start_ns(window.start_ns);
  out->set_end_ns(window.end_ns);
  out->set_status(Str(window.status));
}

void EncodeOpenRanges(const fs_batch& batch, v1::OpenRanges* out) {
  out->set_time_ns(batch.open_ranges_time_ns);
  for (uint32_t t = 0; t < batch.num_open_threads; ++t) {
    const fs_thread_open_ranges& thread = batch.open_threads[t];
    v1::ThreadOpenRanges* encoded = out->add_threads();
    encoded->set_thread_id(thread.thread_id);
    for (uint32_t i = 0; i < thread.num_modules; ++i) {
      v1::OpenRange* range = encoded->add_modules();
      range->set_path_id(thread.modules[i].path_id);
      range->set_start_ns(thread.modules[i].start_ns);
    }
    encoded->set_module_depth(thread.module_depth);
    for (uint32_t i = 0; i < thread.num_phases; ++i) {
      v1::OpenRange* range = encoded->add_phases();
      range->set_path_id(thread.phases[i].path_id);
      range->set_start_ns(thread.phases[i].start_ns);
    }
    encoded->set_phase_depth(thread.phase_depth);
  }
}

void EncodeLosses(const fs_batch& batch, const TransportLosses& extra, v1::Batch* out) {
  std::map<uint32_t, uint64_t> by_cause;
  for (uint32_t i = 0; i < batch.num_losses; ++i) {
    by_cause[batch.losses[i].cause] += batch.losses[i].records;
  }
  if (extra.daemon_unreachable > 0) {
    by_cause[v1::LOSS_CAUSE_DAEMON_UNREACHABLE] += extra.daemon_unreachable;
  }
  if (extra.backlog_full > 0) by_cause[v1::LOSS_CAUSE_BACKLOG_FULL] += extra.backlog_full;
  if (extra.rejected > 0) by_cause[v1::LOSS_CAUSE_REJECTED] += extra.rejected;
  for (const auto& [cause, records] : by_cause) {
    auto* loss = out->add_losses();
    loss->set_cause(static_cast<v1::LossCause>(cause));
    loss->set_records(records);
  }
}

}  // namespace

void EncodeHello(const fs_hello& hello, v1::SessionHello* out) {
  out->set_protocol_version(kProtocolVersion);
  out->set_session_id(Str(hello.session_id));
  out->set_job_id(Str(hello.job_id));
  out->set_rank(hello.rank);
  out->set_local_rank(hello.local_rank);
  out->set_world_size(hello.world_size);
  EncodeLayout(hello.layout, out->mutable_layout());
  out->set_host(Str(hello.host));
  out->set_pid(hello.pid);
  for (uint32_t i = 0; i < hello.num_devices; ++i) {
    EncodeDevice(hello.devices[i], out->add_devices());
  }
  out->set_injector_version(Str(hello.injector_version));
  out->set_start_time_ns(hello.start_time_ns);
  out->set_command(Str(hello.command));
  out->set_gpu_status(Str(hello.gpu_status));
}

void EncodeBatch(const fs_batch& batch, uint64_t seq, bool drop_records,
                 const TransportLosses& transport_losses, v1::Batch* out) {
  out->set_seq(seq);
  for (uint32_t i = 0; i < batch.num_strings; ++i) {
    auto* s = out->add_strings();
    s->set_id(batch.strings[i].id);
    s->set_value(Str(batch.strings[i].value));
  }
  for (uint32_t i = 0; i < batch.num_paths; ++i) {
    const fs_range_path& p = batch.paths[i];
    auto* path = out->add_paths();
    path->set_id(p.id);
    path->set_parent_id(p.parent_id);
    path->set_name(Str(p.name));
    path->set_domain(Str(p.domain));
  }
  if (!drop_records) {
    for (uint32_t i = 0; i < batch.num_ranges; ++i) {
      const fs_range_event& r = batch.ranges[i];
      auto* range = out->add_ranges();
      range->set_path_id(r.path_id);
      range->set_instance_id(r.instance_id);
      range->set_parent_instance_id(r.parent_instance_id);
      range->set_thread_id(r.thread_id);
      range->set_start_ns(r.start_ns);
      range->set_end_ns(r.end_ns);
      range->set_kind(static_cast<v1::RangeKind>(r.kind));
      range->set_counted(r.counted != 0);
    }
    for (uint32_t i = 0; i < batch.num_kernels; ++i) {
      EncodeKernel(batch.kernels[i], out->add_kernels());
    }
    for (uint32_t i = 0; i < batch.num_kernel_flops; ++i) {
      EncodeKernelFlops(batch.kernel_flops[i], out->add_kernel_flops());
    }
  }
  // Windows are few and say which steps were counted: kept even when records are dropped.
  for (uint32_t i = 0; i < batch.num_windows; ++i) {
    EncodeWindow(batch.windows[i], out->add_windows());
  }
  for (uint32_t i = 0; i < batch.num_metadata; ++i) {
    auto* m = out->add_metadata();
    m->set_key(Str(batch.metadata[i].key));
    m->set_value(Str(batch.metadata[i].value));
    m->set_time_ns(batch.metadata[i].time_ns);
  }
  EncodeLosses(batch, transport_losses, out);
  out->set_final(batch.final != 0);
  // Not records (a few dozen bytes a process): kept when records are dropped.
  if (batch.has_open_ranges != 0) EncodeOpenRanges(batch, out->mutable_open_ranges());
}

uint64_t DroppableRecords(const fs_batch& batch) {
  return uint64_t{batch.num_ranges} + batch.num_kernels + batch.num_kernel_flops;
}

}  // namespace flopscope::transport
