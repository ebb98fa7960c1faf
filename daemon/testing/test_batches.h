#pragma once

// Builders for the records the daemon's unit tests send: plausible values by default, so each
// test only spells out what it is about.

#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "common/version.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon::fixtures {

// A fixed, recent base time for timestamps: inside the validator's window on any test day.
inline int64_t BaseNs() {
  static const int64_t base = absl::GetCurrentTimeNanos() - 3'600'000'000'000LL;
  return base;
}

inline v1::SessionHello Hello(const std::string& job, int rank, const std::string& session_id) {
  v1::SessionHello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_session_id(session_id);
  hello.set_job_id(job);
  hello.set_rank(rank);
  hello.set_world_size(2);
  hello.set_host("node-1");
  hello.set_pid(4242 + rank);
  hello.set_command("python train.py");
  hello.set_injector_version(kVersion);
  hello.set_start_time_ns(BaseNs());
  // Like the injector's, one secret per session, so a test's reconnect resumes it.
  hello.set_resume_token("token-of-" + session_id);
  v1::Device* device = hello.add_devices();
  device->set_name("NVIDIA H100 80GB HBM3");
  return hello;
}

inline v1::RangePath* AddPath(v1::Batch& batch, uint64_t id, uint64_t parent_id,
                              const std::string& name, const std::string& domain = "") {
  v1::RangePath* path = batch.add_paths();
  path->set_id(id);
  path->set_parent_id(parent_id);
  path->set_name(name);
  path->set_domain(domain);
  return path;
}

inline v1::StringDef* AddString(v1::Batch& batch, uint32_t id, const std::string& value) {
  v1::StringDef* def = batch.add_strings();
  def->set_id(id);
  def->set_value(value);
  return def;
}

// A closed range of `path_id` from BaseNs() + start_offset lasting `duration` ns.
inline v1::RangeEvent* AddRange(v1::Batch& batch, uint64_t path_id, int64_t start_offset,
                                int64_t duration) {
  static uint64_t next_instance = 1;
  v1::RangeEvent* range = batch.add_ranges();
  range->set_path_id(path_id);
  range->set_instance_id(next_instance++);
  range->set_thread_id(77);
  range->set_start_ns(BaseNs() + start_offset);
  range->set_end_ns(BaseNs() + start_offset + duration);
  range->set_kind(v1::RANGE_KIND_PUSH_POP);
  return range;
}

inline v1::KernelRecord* AddKernel(v1::Batch& batch, uint64_t path_id, uint32_t name_id,
                                   int64_t start_offset, int64_t duration) {
  static uint64_t next_correlation = 1;
  v1::KernelRecord* kernel = batch.add_kernels();
  kernel->set_correlation_id(next_correlation++);
  kernel->set_path_id(path_id);
  kernel->set_name_id(name_id);
  kernel->set_stream_id(7);
  kernel->set_start_ns(BaseNs() + start_offset);
  kernel->set_end_ns(BaseNs() + start_offset + duration);
  kernel->set_grid_x(128);
  kernel->set_grid_y(1);
  kernel->set_grid_z(1);
  kernel->set_block_x(256);
  kernel->set_block_y(1);
  kernel->set_block_z(1);
  kernel->set_kind(v1::ACTIVITY_KIND_KERNEL);
  return kernel;
}

// Counted FLOPs of one kernel launched in `path_id` while `phase_path_id` was the innermost
// flopscope-domain range, in step `step` (-1: none). Precisions are set by the caller.
inline v1::KernelFlops* AddKernelFlops(v1::Batch& batch, uint64_t path_id, uint32_t name_id,
                                       int64_t step, uint64_t phase_path_id = 0) {
  static uint64_t next_correlation = 1'000'000;
  v1::KernelFlops* counted = batch.add_kernel_flops();
  counted->set_correlation_id(next_correlation++);
  counted->set_path_id(path_id);
  counted->set_name_id(name_id);
  counted->set_counted_step(step);
  counted->set_phase_path_id(phase_path_id);
  counted->mutable_flops();  // present, all zero
  return counted;
}

// A counter window over steps first..last (both -1: no step marks), from BaseNs() + start_offset.
inline v1::CounterWindowRecord* AddWindow(v1::Batch& batch, int64_t first, int64_t last,
                                          int64_t start_offset = 0, int64_t duration = 1000) {
  v1::CounterWindowRecord* window = batch.add_windows();
  window->set_first_step(first);
  window->set_last_step(last);
  window->set_trigger("env: steps=" + std::to_string(first) + "-" + std::to_string(last));
  window->set_metric_set("full");
  window->set_chip("GH100");
  window->set_passes(3);
  window->set_start_ns(BaseNs() + start_offset);
  window->set_end_ns(BaseNs() + start_offset + duration);
  return window;
}

inline v1::Metadata* AddMetadata(v1::Batch& batch, const std::string& key,
                                 const std::string& value) {
  v1::Metadata* entry = batch.add_metadata();
  entry->set_key(key);
  entry->set_value(value);
  entry->set_time_ns(BaseNs());
  return entry;
}

inline v1::LossCounter* AddLoss(v1::Batch& batch, v1::LossCause cause, uint64_t records) {
  v1::LossCounter* loss = batch.add_losses();
  loss->set_cause(cause);
  loss->set_records(records);
  return loss;
}

}  // namespace flopscope::daemon::fixtures
