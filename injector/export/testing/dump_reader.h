#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flopscope::injector::testing {

// The parsed form of a FLOPSCOPE_DEBUG_DUMP file (format in dump_sink.h).
struct Dump {
  struct Path {
    uint64_t id = 0, parent_id = 0;
    std::string domain, name;
  };
  struct Range {
    uint64_t path_id = 0, instance_id = 0, parent_instance_id = 0, thread_id = 0;
    int64_t start_ns = 0, end_ns = 0;
    uint32_t kind = 0;
    bool counted = false;
  };
  struct Kernel {
    uint64_t correlation_id = 0, path_id = 0, range_instance_id = 0;
    uint32_t name_id = 0;
    int64_t start_ns = 0, end_ns = 0;
    bool counted = false;
  };
  struct Flops {
    uint64_t correlation_id = 0, path_id = 0, range_instance_id = 0;
    uint32_t name_id = 0, device_id = 0;
    uint64_t phase_path_id = 0;
    int64_t counted_step = -1;
    double fp64 = 0, fp32 = 0, fp16 = 0, tensor = 0;
  };
  struct Window {
    int64_t first_step = -1, last_step = -1;
    std::string trigger, metric_set, chip;
    uint32_t passes = 0;
    uint64_t kernels_counted = 0, ranges_unmatched = 0;
    int64_t start_ns = 0, end_ns = 0;
    std::string status;
  };
  std::vector<std::string> hello;  // the hello line's fields after "hello"
  std::map<uint32_t, std::string> strings;
  std::vector<Kernel> kernels;
  std::vector<Flops> flops;
  std::vector<Window> windows;
  std::map<uint64_t, Path> paths;
  std::vector<Range> ranges;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::map<uint32_t, uint64_t> losses;  // the last value seen per cause (cumulative)
  int batches = 0;
  int final_batches = 0;
  bool final_is_last = false;         // the last batch was the final one
  std::vector<std::string> problems;  // lines that do not parse, records before their path

  // "Model/layer.0/attn" for a path id.
  std::string PathOf(uint64_t id) const;
  // Ranges whose full path is `path`.
  std::vector<Range> RangesAt(const std::string& path) const;
  uint64_t Loss(uint32_t cause) const;
};

// Reads and checks a dump; a missing file gives an empty Dump with a problem noted.
Dump ReadDump(const std::string& file);

}  // namespace flopscope::injector::testing
