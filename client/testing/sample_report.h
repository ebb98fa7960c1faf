#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client::testing {

// A hand-built report as the daemon would send it for a CPU-only job (no GPU records):
//   job "demo-job", ranks 0 (host node-a, pid 101) and 1 (host node-b, pid 202), both with
//   gpu_status "no CUDA driver: NVTX ranges only"; rank 0 lost 3 records (buffer_full).
//   modules (depth-first):
//     Net                   calls 4  cpu 8'000'000 ns  params 1'250'000
//     Net/encoder           calls 4  cpu 6'000'000 ns  params 1'000'000
//     Net/encoder/attn "q"\ calls 8  cpu 2'500'000 ns  (name needs escaping; no params)
//     Net/head              calls 4  cpu 1'000'000 ns  params 250'000
//   phases: step (2 calls, 9'000'000 ns, min 4'000'000, max 5'000'000),
//           forward (2 calls, 3'000'000 ns, min 1'400'000, max 1'600'000)
//   losses: buffer_full 3; metadata batch_size=8 and a params key.
flopscope::v1::Report CpuOnlyReport();

// The same job with GPU records: every module has gpu_time_ns and kernels, Net has flops.
flopscope::v1::Report GpuReport();

// A torch job whose announced tree (`module` marks, docs/marks.md) holds every kind of row the
// views must carry, one step (step 1) with forward / backward / optimizer / step phases:
//   Net                      ran
//     embed                  ran
//     layers   ModuleList    a container whose children ran
//       0      Block         ran;  0/attn ran
//       1      Block         ran
//     heads    ModuleDict    a container none of whose modules ran
//       spare  Linear        never ran
//     unused   LayerNorm     never ran
//     head     Linear        ran under another range path (Net/layers.1/head, `range_module`)
//   CrossEntropyLoss         a root of its own, outside the model
// The daemon's rows come in another order than the model's (the loss first).
flopscope::v1::Report ContainerTreeReport();

// ContainerTreeReport's model paths in model order (the loss root last).
std::vector<std::string> ContainerTreeModelPaths();

// One module line of the text report's detailed section (DeepSpeed's `print(model)` tree): its
// depth, name ("" for the root, "0" for "(0): Block(") and class.
struct TreeLine {
  uint32_t depth = 0;
  std::string name;
  std::string class_name;
};

// The module lines of the detailed section of `text` (RenderProfileText or RenderDetailed), in
// order; figure lines and ")" lines are left out.
std::vector<TreeLine> DetailedTreeLines(const std::string& text);

// Adds one metadata mark (`key` = "class Net/head", "params Net", "module Net/layers", ...) as
// the daemon copies a producer's marks into the report.
void Announce(flopscope::v1::Report* report, const std::string& key, const std::string& value);

}  // namespace flopscope::client::testing
