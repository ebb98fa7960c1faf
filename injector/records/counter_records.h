#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flopscope::injector {

// flopscope.v1.KernelFlops with its strings owned (the core cannot include protobuf headers).
// Made on the exporter thread when a counter window's data is decoded; the batch assembler turns
// it into fs_kernel_flops views.
struct KernelFlopsRecord {
  uint64_t correlation_id = 0;
  uint64_t path_id = 0;            // innermost module range at launch
  uint64_t range_instance_id = 0;  // its occurrence
  uint32_t name_id = 0;            // interned kernel name; 0 when unknown (graph launches)
  uint32_t device_id = 0;
  uint64_t phase_path_id = 0;  // innermost flopscope-domain range of the process at launch
  int64_t counted_step = -1;   // step ordinal at launch; -1 when none was open
  double fp64 = 0, fp32 = 0, fp16 = 0;
  std::vector<std::pair<std::string, double>> tensor;  // (source, FLOPs)
  std::vector<std::pair<std::string, double>> raw;     // (metric, value), for audit

  // What the record holds of the session's memory budget (strings included).
  uint64_t Bytes() const {
    uint64_t bytes = sizeof *this;
    for (const auto& [name, value] : tensor)
      bytes += sizeof(std::pair<std::string, double>) + name.size();
    for (const auto& [name, value] : raw)
      bytes += sizeof(std::pair<std::string, double>) + name.size();
    return bytes;
  }
};

// flopscope.v1.CounterWindowRecord, strings owned.
struct CounterWindowRecord {
  int64_t first_step = -1;  // inclusive; -1 when the window saw no step
  int64_t last_step = -1;
  std::string trigger;     // "env: steps=3-4", "daemon: control 7"
  std::string metric_set;  // "full" | "cheap"
  std::string chip;        // chips of the counted contexts, comma-separated when several
  uint32_t passes = 0;     // kernel-replay passes per kernel (the largest of the window's plans)
  uint64_t kernels_counted = 0;
  uint64_t ranges_unmatched = 0;
  // Communication kernels (NCCL, ...) launched in the window and kept out of kernel replay
  // (gpu-review D1): they have no counters, and their FLOPs are not the model's.
  uint64_t comm_kernels_excluded = 0;
  int64_t start_ns = 0;  // CLOCK_REALTIME ns
  int64_t end_ns = 0;
  std::string status;  // "" when counting went fine; else why it did not (one sentence)

  uint64_t Bytes() const {
    return sizeof *this + trigger.size() + metric_set.size() + chip.size() + status.size();
  }
};

}  // namespace flopscope::injector
