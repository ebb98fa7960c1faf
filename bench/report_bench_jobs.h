#pragma once

// The jobs bench/report_benchmark, trace_export and aggregator_scale ask about, sent through a
// daemon's Collector service the way producers send them: a model of `layers` layers of
// `ops_per_layer` ops, one batch per step, the kernels of a step spread evenly over the ops. And
// the in-process daemon those benches start.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/server/daemon_server.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::bench {

struct RankShape {
  std::string job;
  std::string host = {};  // the hello's host; empty: "bench-node-<rank / 8>"
  int rank = 0;
  int world_size = 1;
  int steps = 1;
  int kernels_per_step = 1;
  int layers = 8;
  int ops_per_layer = 4;
  // This rank's kernels of op `slow_op` (0 .. layers * ops_per_layer - 1) run kSlowKernelNs
  // longer and its steps as much longer: a straggler for `flopscope ranks`. -1: none.
  int slow_rank = -1;
  int slow_op = -1;
  // Steps first..last ran inside a counter window: their ranges and kernels are marked counted
  // (kernel replay slows them down by kCountedSlowdown). -1: none.
  int counted_first = -1;
  int counted_last = -1;
};

inline constexpr int64_t kSlowKernelNs = 20'000;
inline constexpr int kCountedSlowdown = 10;
// The FLOPs every counted kernel carries (a KernelFlops record: mostly BF16 tensor FLOPs), and
// the CUDA-core FP32 part of them.
inline constexpr double kFlopsPerCountedKernel = 6.72e8;
inline constexpr double kFp32FlopsPerCountedKernel = 2.0e6;

// "model/layer.3/op.1": the module path of op `op_index` as reports print it.
std::string OpModulePath(const RankShape& shape, int op_index);
// Module rows a report of this shape has: the model, its layers and their ops.
int ModuleCount(const RankShape& shape);
// Kernels of the rank that no counter window covered (counted ones stay out of the rollups).
uint64_t UncountedKernels(const RankShape& shape);

// One rank's producer, without the sending: its hello and its batches (seq = step + 1) exactly
// as FillJob sends them. Steps must be built in order, 0 to shape.steps - 1.
class RankBatches {
 public:
  explicit RankBatches(const RankShape& shape);
  ~RankBatches();
  const v1::SessionHello& hello() const { return hello_; }
  v1::Batch Step(int step);

 private:
  class Builder;
  RankShape shape_;
  v1::SessionHello hello_;
  std::unique_ptr<Builder> builder_;
};

// Sends `ranks` ranks of `shape` (rank 0 .. ranks - 1) to the daemon at `target`, `threads`
// producers at a time, each batch acknowledged before the next. Exits the process on a refusal.
void FillJob(const std::string& target, const RankShape& shape, int ranks, int threads);

// A daemon in this process on `dir`/fs.sock with its data in `dir`/data (created), logging
// warnings only (it logs every connect at info, which would bury a bench's figures) and draining
// streams for 200 ms at Shutdown.
absl::StatusOr<std::unique_ptr<daemon::DaemonServer>> StartBenchDaemon(
    const std::filesystem::path& dir);

}  // namespace flopscope::bench
