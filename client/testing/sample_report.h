#pragma once

#include <string>

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

// Adds one metadata mark (`key` = "class Net/head", "params Net", "module Net/layers", ...) as
// the daemon copies a producer's marks into the report.
void Announce(flopscope::v1::Report* report, const std::string& key, const std::string& value);

}  // namespace flopscope::client::testing
