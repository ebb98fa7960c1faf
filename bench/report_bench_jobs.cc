// Builds and sends the bench jobs, and starts the benches' in-process daemon (report_bench_jobs.h).
#include "bench/report_bench_jobs.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/version.h"
#include "daemon/base/logger.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::bench {
namespace {

namespace v1 = flopscope::v1;

constexpr int64_t kKernelGapNs = 1000;
constexpr int64_t kKernelNs = 500;
constexpr int64_t kStepGapNs = 1'000'000;
constexpr const char* kPhases[] = {"step", "forward", "backward", "optimizer"};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::exit(1);
}

int OpCount(const RankShape& shape) { return shape.layers * shape.ops_per_layer; }

// Path ids: 1 the model, then per layer its own id followed by its ops; the phases after.
uint64_t LayerPath(const RankShape& shape, int layer) {
  return 2 + static_cast<uint64_t>(layer) * (shape.ops_per_layer + 1);
}
uint64_t OpPath(const RankShape& shape, int layer, int op) {
  return LayerPath(shape, layer) + 1 + op;
}
uint64_t FirstPhasePath(const RankShape& shape) { return LayerPath(shape, shape.layers); }

bool Counted(const RankShape& shape, int step) {
  return step >= shape.counted_first && step <= shape.counted_last;
}

// The first and one-past-last kernel of op `op_index` within a step.
std::pair<int, int> KernelsOfOp(const RankShape& shape, int op_index) {
  const int ops = OpCount(shape);
  return {shape.kernels_per_step * op_index / ops, shape.kernels_per_step * (op_index + 1) / ops};
}

void AddDefinitions(const RankShape& shape, v1::Batch& batch) {
  auto add_path = [&](uint64_t id, uint64_t parent, std::string name, std::string domain) {
    v1::RangePath* path = batch.add_paths();
    path->set_id(id);
    path->set_parent_id(parent);
    path->set_name(std::move(name));
    path->set_domain(std::move(domain));
  };
  add_path(1, 0, "model", "");
  for (int layer = 0; layer < shape.layers; ++layer) {
    add_path(LayerPath(shape, layer), 1, "layer." + std::to_string(layer), "");
    for (int op = 0; op < shape.ops_per_layer; ++op) {
      add_path(OpPath(shape, layer, op), LayerPath(shape, layer), "op." + std::to_string(op), "");
    }
  }
  for (uint64_t i = 0; i < 4; ++i) add_path(FirstPhasePath(shape) + i, 0, kPhases[i], "flopscope");
  v1::StringDef* name = batch.add_strings();
  name->set_id(1);
  name->set_value("_Z11gemm_kernelIfLi128ELi64EEvPKT_S2_PS0_iii");
  for (const auto& [key, value] :
       {std::pair<const char*, const char*>{"batch_size", "8"}, {"precision", "bf16"}}) {
    v1::Metadata* entry = batch.add_metadata();
    entry->set_key(key);
    entry->set_value(value);
    entry->set_time_ns(absl::GetCurrentTimeNanos() - 3'600'000'000'000LL);
  }
}

// Builds one step's batch: its phase ranges, the module ranges and its kernels. A counted step
// is kCountedSlowdown times as long, as kernel replay makes it.
class StepBatchBuilder {
 public:
  StepBatchBuilder(const RankShape& shape, int64_t base_ns) : shape_(shape), next_start_(base_ns) {}

  v1::Batch Build(int step) {
    v1::Batch batch;
    batch.set_seq(static_cast<uint64_t>(step) + 1);
    if (step == 0) AddDefinitions(shape_, batch);
    counted_ = Counted(shape_, step);
    scale_ = counted_ ? kCountedSlowdown : 1;
    const int64_t gap = kKernelGapNs * scale_;
    const int64_t length = static_cast<int64_t>(shape_.kernels_per_step) * gap;
    const bool slow = shape_.rank == shape_.slow_rank;
    const int64_t start = next_start_;
    next_start_ += length + kStepGapNs;
    step_ = step;
    if (counted_ && step == shape_.counted_first) window_start_ = start;
    AddPhases(batch, start, length, slow ? SlowKernels() * kSlowKernelNs : 0);
    // Push/pop ranges close innermost first, so each range event follows its children's, as
    // the injector commits them: the instance ids of the enclosing ranges are taken up front.
    const uint64_t model = next_instance_++;
    for (int layer = 0; layer < shape_.layers; ++layer) {
      const uint64_t layer_instance = next_instance_++;
      const int first_op = layer * shape_.ops_per_layer;
      for (int op_index = first_op; op_index < first_op + shape_.ops_per_layer; ++op_index) {
        const auto [first, end] = KernelsOfOp(shape_, op_index);
        const uint64_t op_path = OpPath(shape_, layer, op_index - first_op);
        const uint64_t op = next_instance_++;
        const int64_t duration =
            kKernelNs * scale_ + (slow && op_index == shape_.slow_op ? kSlowKernelNs : 0);
        for (int k = first; k < end; ++k) AddKernel(batch, op_path, op, start + k * gap, duration);
        AddRange(batch, op, op_path, layer_instance, start + first * gap, start + end * gap);
      }
      const int64_t layer_start = start + KernelsOfOp(shape_, first_op).first * gap;
      const int64_t layer_end =
          start + KernelsOfOp(shape_, first_op + shape_.ops_per_layer - 1).second * gap;
      AddRange(batch, layer_instance, LayerPath(shape_, layer), model, layer_start, layer_end);
    }
    AddRange(batch, model, 1, 0, start, start + length);
    if (counted_ && step == shape_.counted_last) AddWindow(batch, start + length);
    if (step + 1 == shape_.steps) batch.set_final(true);
    return batch;
  }

 private:
  int SlowKernels() const {
    const auto [first, end] = KernelsOfOp(shape_, shape_.slow_op);
    return end - first;
  }

  void AddPhases(v1::Batch& batch, int64_t start, int64_t length, int64_t extra) {
    const int64_t bounds[][2] = {{start, start + length + extra},
                                 {start, start + length / 3},
                                 {start + length / 3, start + length * 9 / 10},
                                 {start + length * 9 / 10, start + length}};
    for (uint64_t i = 0; i < 4; ++i) {
      v1::RangeEvent* range = batch.add_ranges();
      range->set_path_id(FirstPhasePath(shape_) + i);
      range->set_instance_id(next_instance_++);
      range->set_thread_id(1);
      range->set_start_ns(bounds[i][0]);
      range->set_end_ns(bounds[i][1]);
      range->set_kind(v1::RANGE_KIND_START_END);
      range->set_counted(counted_);
    }
  }

  void AddRange(v1::Batch& batch, uint64_t instance, uint64_t path, uint64_t parent, int64_t start,
                int64_t end) {
    v1::RangeEvent* range = batch.add_ranges();
    range->set_path_id(path);
    range->set_instance_id(instance);
    range->set_parent_instance_id(parent);
    range->set_thread_id(77);
    range->set_start_ns(start);
    range->set_end_ns(end);
    range->set_kind(v1::RANGE_KIND_PUSH_POP);
    range->set_counted(counted_);
  }

  void AddKernel(v1::Batch& batch, uint64_t path, uint64_t instance, int64_t start,
                 int64_t duration) {
    v1::KernelRecord* kernel = batch.add_kernels();
    kernel->set_correlation_id(next_correlation_++);
    kernel->set_path_id(path);
    kernel->set_range_instance_id(instance);
    kernel->set_name_id(1);
    kernel->set_stream_id(7);
    kernel->set_start_ns(start + 100);
    kernel->set_end_ns(start + 100 + duration);
    kernel->set_grid_x(108);
    kernel->set_grid_y(1);
    kernel->set_grid_z(1);
    kernel->set_block_x(256);
    kernel->set_block_y(1);
    kernel->set_block_z(1);
    kernel->set_kind(v1::ACTIVITY_KIND_KERNEL);
    kernel->set_counted(counted_);
    if (counted_) AddFlops(batch, *kernel);
  }

  // What the injector sends for a counted kernel: a GEMM-like mix, mostly BF16 tensor FLOPs,
  // with its raw counters.
  void AddFlops(v1::Batch& batch, const v1::KernelRecord& kernel) {
    v1::KernelFlops* counted = batch.add_kernel_flops();
    counted->set_correlation_id(kernel.correlation_id());
    counted->set_path_id(kernel.path_id());
    counted->set_range_instance_id(kernel.range_instance_id());
    counted->set_name_id(kernel.name_id());
    counted->set_phase_path_id(FirstPhasePath(shape_) + 1);  // forward
    counted->set_counted_step(step_);
    v1::FlopCounters* flops = counted->mutable_flops();
    flops->set_fp32(kFp32FlopsPerCountedKernel);
    v1::FlopCounters::Tensor* tensor = flops->add_tensor();
    tensor->set_source("bf16_dst_fp32");
    tensor->set_flops(kFlopsPerCountedKernel - kFp32FlopsPerCountedKernel);
    const std::pair<const char*, double> raw[] = {
        {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 1.0e6},
        {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 6.7e8},
        {"gpu__time_duration.sum", 12000}};
    for (const auto& [metric, value] : raw) {
      v1::FlopCounters::Raw* entry = flops->add_raw();
      entry->set_metric(metric);
      entry->set_value(value);
    }
  }

  void AddWindow(v1::Batch& batch, int64_t end_ns) {
    v1::CounterWindowRecord* window = batch.add_windows();
    window->set_first_step(shape_.counted_first);
    window->set_last_step(shape_.counted_last);
    window->set_trigger("env: steps=" + std::to_string(shape_.counted_first) + "-" +
                        std::to_string(shape_.counted_last));
    window->set_metric_set("full");
    window->set_chip("GH100");
    window->set_passes(6);
    window->set_kernels_counted(
        static_cast<uint64_t>(shape_.counted_last - shape_.counted_first + 1) *
        shape_.kernels_per_step);
    window->set_start_ns(window_start_);
    window->set_end_ns(end_ns);
  }

  const RankShape& shape_;
  int64_t next_start_;
  bool counted_ = false;
  int step_ = 0;
  int64_t window_start_ = 0;
  int64_t scale_ = 1;
  uint64_t next_instance_ = 1;
  uint64_t next_correlation_ = 1;
};

v1::SessionHello HelloFor(const RankShape& shape) {
  v1::SessionHello hello;
  hello.set_protocol_version(flopscope::kProtocolVersion);
  hello.set_session_id(shape.job + "-rank-" + std::to_string(shape.rank));
  hello.set_job_id(shape.job);
  hello.set_rank(shape.rank);
  hello.set_world_size(shape.world_size);
  hello.set_host(shape.host.empty() ? "bench-node-" + std::to_string(shape.rank / 8) : shape.host);
  hello.set_pid(10000 + shape.rank);
  hello.set_command("python train.py");
  hello.set_injector_version(flopscope::kVersion);
  hello.set_start_time_ns(absl::GetCurrentTimeNanos() - 3'600'000'000'000LL);
  hello.add_devices()->set_name("NVIDIA H100 80GB HBM3");
  return hello;
}

// One producer: hello, every step's batch (each acknowledged before the next), then the end.
void Produce(v1::Collector::Stub& collector, const RankShape& shape) {
  grpc::ClientContext context;
  auto stream = collector.Stream(&context);
  v1::UpMessage up;
  v1::DownMessage down;
  RankBatches batches(shape);
  *up.mutable_hello() = batches.hello();
  if (!stream->Write(up) || !stream->Read(&down) || !down.has_welcome()) {
    Die("no Welcome for " + shape.job + " rank " + std::to_string(shape.rank) + ": " +
        stream->Finish().error_message());
  }
  for (int step = 0; step < shape.steps; ++step) {
    *up.mutable_batch() = batches.Step(step);
    if (!stream->Write(up) || !stream->Read(&down) || !down.has_ack()) {
      stream->WritesDone();
      Die("batch refused for rank " + std::to_string(shape.rank) + ": " +
          stream->Finish().error_message());
    }
  }
  stream->WritesDone();
  while (stream->Read(&down)) {
  }
  if (grpc::Status status = stream->Finish(); !status.ok()) Die(status.error_message());
}

}  // namespace

class RankBatches::Builder : public StepBatchBuilder {
 public:
  using StepBatchBuilder::StepBatchBuilder;
};

RankBatches::RankBatches(const RankShape& shape)
    : shape_(shape),
      hello_(HelloFor(shape_)),
      builder_(
          std::make_unique<Builder>(shape_, absl::GetCurrentTimeNanos() - 3'000'000'000'000LL)) {}

RankBatches::~RankBatches() = default;

v1::Batch RankBatches::Step(int step) { return builder_->Build(step); }

std::string OpModulePath(const RankShape& shape, int op_index) {
  return "model/layer." + std::to_string(op_index / shape.ops_per_layer) + "/op." +
         std::to_string(op_index % shape.ops_per_layer);
}

int ModuleCount(const RankShape& shape) { return 1 + shape.layers * (1 + shape.ops_per_layer); }

uint64_t UncountedKernels(const RankShape& shape) {
  int uncounted_steps = 0;
  for (int step = 0; step < shape.steps; ++step) uncounted_steps += Counted(shape, step) ? 0 : 1;
  return static_cast<uint64_t>(uncounted_steps) * shape.kernels_per_step;
}

void FillJob(const std::string& target, const RankShape& shape, int ranks, int threads) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto collector = v1::Collector::NewStub(channel);
  // Producers claim ranks from the counter; each builds its own shape.
  std::atomic<int> next{0};
  auto work = [&] {
    for (int rank = next.fetch_add(1); rank < ranks; rank = next.fetch_add(1)) {
      RankShape mine = shape;
      mine.rank = rank;
      Produce(*collector, mine);
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back(work);
  for (std::thread& worker : workers) worker.join();
}

absl::StatusOr<std::unique_ptr<daemon::DaemonServer>> StartBenchDaemon(
    const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError("cannot create " + dir.string() + ": " + error.message());
  daemon::DaemonOptions options;
  options.data_dir = (dir / "data").string();
  options.socket_path = (dir / "fs.sock").string();
  options.log_level = daemon::LogLevel::kWarning;
  daemon::SetLogLevel(options.log_level);
  options.drain_timeout = absl::Milliseconds(200);
  return daemon::DaemonServer::Start(options);
}

}  // namespace flopscope::bench
