#pragma once

#include <cstdio>
#include <string>

#include "injector/export/batch_sink.h"
#include "injector/records/identity.h"

namespace flopscope::injector {

// FLOPSCOPE_DEBUG_DUMP=<file> (test-only): writes each batch as tab-separated text lines instead
// of sending it, so tests can see exactly what the injector produced without a daemon:
//   hello <session_id> <job_id> <rank> <local_rank> <world_size> <tp> <pp> <dp> <tp_rank>
//         <pp_rank> <dp_rank> <layout_source> <gpu_status> <command>
//   batch <n> <final 0|1>
//   string <id> <value>
//   path <id> <parent_id> <domain> <name>
//   range <path_id> <instance_id> <parent_instance_id> <thread_id> <start_ns> <end_ns> <kind>
//         <counted>
//   kernel <correlation_id> <path_id> <range_instance_id> <name_id> <start_ns> <end_ns> <counted>
//   flops <correlation_id> <path_id> <range_instance_id> <name_id> <device_id> <phase_path_id>
//         <counted_step> <fp64> <fp32> <fp16> <tensor FLOPs, all sources>
//   window <first_step> <last_step> <trigger> <metric_set> <chip> <passes> <kernels_counted>
//          <ranges_unmatched> <start_ns> <end_ns> <status>
//   meta <key> <value> <time_ns>
//   loss <cause> <records>
// Tabs, newlines and backslashes inside text are written as \t, \n and \\.
class DumpSink : public BatchSink {
 public:
  DumpSink(std::string path, SessionIdentity identity, std::string gpu_status);
  ~DumpSink() override;

  bool Open(std::string* error) override;
  void Submit(const fs_batch& batch, uint64_t records) override;
  DeliveryOutcome Finish(uint32_t exit_timeout_ms) override;
  std::string Destination() const override { return path_; }

 private:
  void WriteHello();
  void Line(const std::string& line);

  const std::string path_;
  const SessionIdentity identity_;
  const std::string gpu_status_;
  FILE* file_ = nullptr;
  uint64_t batches_ = 0;
  uint64_t records_ = 0;
};

}  // namespace flopscope::injector
