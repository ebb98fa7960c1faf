// bench/storage_benchmark: what a rank file costs on disk per kernel and per step, raw and with old
// steps folded (daemon/store/step_folding.h), and what that projects to per rank and hour.
//
// One rank's batches go straight to RankStore (no daemon: only the file matters here), one batch
// per step of a model of `layers` layers of `ops_per_layer` ops (one range each, the kernels of a
// step spread evenly over them) under `step` > `forward`, steps `step_ms` apart. Two files get the
// same batches: one keeps everything raw, the other folds all but --keep-raw-steps steps as
// flopscoped does. Bytes are the pages a file uses (page_count - freelist_count, WAL
// checkpointed): a fold frees pages that later commits reuse, so the file stops growing by them.
// The folded file's cost per step is its growth over the second half of the run, when the raw
// window is full and steady: what a week-long job adds per step.
//
// Prints the figures, then one line:
//   storage_bench: raw_bytes_per_kernel=X raw_bytes_per_step=Y folded_bytes_per_step=Z
//   projected_mb_per_rank_hour=P (target <= 50 at 1000 kernels/step, 1 step/s)
//
//   storage_benchmark [--steps 2000] [--kernels-per-step 1000] [--layers 24] [--ops-per-layer 12]
//                     [--keep-raw-steps 600] [--step-ms 1000] [--keep-data]
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sqlite/sqlite_db.h"
#include "common/version.h"
#include "daemon/store/rank_store.h"
#include "daemon/store/step_folding.h"
#include "flopscope/v1/records.pb.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = flopscope::v1;
using flopscope::daemon::FoldPolicy;
using flopscope::daemon::RankStore;

struct Shape {
  int steps = 2000;
  int kernels_per_step = 1000;
  int layers = 24;
  int ops_per_layer = 12;
  int64_t keep_raw_steps = 600;
  int64_t step_ms = 1000;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "storage_benchmark: %s\n", what.c_str());
  std::exit(1);
}

// Path ids: 1 step, 2 forward, 3 model, then per layer one id and its ops' ids.
uint64_t LayerPath(const Shape& shape, int layer) { return 4 + layer * (shape.ops_per_layer + 1); }
uint64_t OpPath(const Shape& shape, int layer, int op) { return LayerPath(shape, layer) + 1 + op; }

// The session started when its first step did (ranges may not start before their session).
v1::SessionHello Hello(int64_t start_ns) {
  v1::SessionHello hello;
  hello.set_protocol_version(flopscope::kProtocolVersion);
  hello.set_session_id("storage-bench-session");
  hello.set_job_id("storage-bench");
  hello.set_world_size(1);
  hello.set_host("bench");
  hello.set_pid(getpid());
  hello.set_command("storage_benchmark");
  hello.set_injector_version(flopscope::kVersion);
  hello.set_start_time_ns(start_ns);
  hello.set_resume_token("storage-bench-token");
  return hello;
}

void AddDefinitions(const Shape& shape, v1::Batch* batch) {
  const auto add_path = [&](uint64_t id, uint64_t parent, const std::string& name,
                            const std::string& domain) {
    v1::RangePath* path = batch->add_paths();
    path->set_id(id);
    path->set_parent_id(parent);
    path->set_name(name);
    path->set_domain(domain);
  };
  add_path(1, 0, "step", "flopscope");
  add_path(2, 1, "forward", "flopscope");
  add_path(3, 2, "model", "");
  for (int layer = 0; layer < shape.layers; ++layer) {
    add_path(LayerPath(shape, layer), 3, "layer." + std::to_string(layer), "");
    for (int op = 0; op < shape.ops_per_layer; ++op) {
      add_path(OpPath(shape, layer, op), LayerPath(shape, layer), "op." + std::to_string(op), "");
    }
  }
  for (int op = 0; op < shape.ops_per_layer; ++op) {
    v1::StringDef* name = batch->add_strings();
    name->set_id(static_cast<uint32_t>(op + 1));
    name->set_value("_Z6kernelILi" + std::to_string(op) + "EEvPfS0_i");
  }
}

// The records of one step, as the injector sends them: ranges in pop order, kernels after.
class StepBatch {
 public:
  StepBatch(const Shape& shape, int64_t start_ns, int step, v1::Batch* batch)
      : shape_(shape), start_ns_(start_ns), step_(step), batch_(batch) {}

  void Write() {
    const int ops = shape_.layers * shape_.ops_per_layer;
    const int64_t step_ns = shape_.step_ms * 1'000'000;
    const int64_t op_ns = step_ns / 2 / ops;  // the forward pass: half of the step
    for (int layer = 0; layer < shape_.layers; ++layer) {
      for (int op = 0; op < shape_.ops_per_layer; ++op) {
        const int index = layer * shape_.ops_per_layer + op;
        const int kernels =
            shape_.kernels_per_step * (index + 1) / ops - shape_.kernels_per_step * index / ops;
        Op(layer, op, start_ns_ + index * op_ns, op_ns, kernels);
      }
      Range(LayerPath(shape_, layer), LayerSlot(layer), 3,
            start_ns_ + layer * shape_.ops_per_layer * op_ns, shape_.ops_per_layer * op_ns);
    }
    Range(3, 3, 2, start_ns_, ops * op_ns);
    Range(2, 2, 1, start_ns_, ops * op_ns + 1000);
    Range(1, 1, 0, start_ns_, step_ns - 1000);
  }

 private:
  // Instance ids, unique per step and slot: 1 step, 2 forward, 3 model, 10 + layer, and
  // 1000 + 100 * layer + op (layers and ops < 100).
  uint64_t Instance(uint64_t slot) const { return uint64_t(step_ + 1) * 100'000 + slot; }
  static uint64_t LayerSlot(int layer) { return 10 + uint64_t(layer); }

  void Range(uint64_t path, uint64_t slot, uint64_t parent_slot, int64_t start, int64_t duration) {
    v1::RangeEvent* range = batch_->add_ranges();
    range->set_path_id(path);
    range->set_instance_id(Instance(slot));
    range->set_parent_instance_id(parent_slot == 0 ? 0 : Instance(parent_slot));
    range->set_thread_id(140'234'567'890'123);
    range->set_start_ns(start);
    range->set_end_ns(start + duration);
    range->set_kind(v1::RANGE_KIND_PUSH_POP);
  }

  void Op(int layer, int op, int64_t start, int64_t duration, int kernels) {
    const uint64_t slot = 1000 + uint64_t(layer) * 100 + uint64_t(op);
    const int64_t kernel_ns = duration / (kernels + 1);
    for (int k = 0; k < kernels; ++k) {
      v1::KernelRecord* kernel = batch_->add_kernels();
      kernel->set_correlation_id(next_correlation_++ + uint64_t(step_) * 1'000'000);
      kernel->set_path_id(OpPath(shape_, layer, op));
      kernel->set_range_instance_id(Instance(slot));
      kernel->set_name_id(static_cast<uint32_t>(op + 1));
      kernel->set_stream_id(7);
      kernel->set_start_ns(start + k * kernel_ns + 500);
      kernel->set_end_ns(start + (k + 1) * kernel_ns - (k * 37 % 200));
      kernel->set_grid_x(108);
      kernel->set_grid_y(1);
      kernel->set_grid_z(1);
      kernel->set_block_x(256);
      kernel->set_block_y(1);
      kernel->set_block_z(1);
      kernel->set_kind(v1::ACTIVITY_KIND_KERNEL);
    }
    Range(OpPath(shape_, layer, op), slot, LayerSlot(layer), start, duration);
  }

  const Shape& shape_;
  const int64_t start_ns_;
  const int step_;
  v1::Batch* batch_;
  uint64_t next_correlation_ = 1;
};

// Pages in use, WAL checkpointed first; with `fold`, after folding as the store would, so that
// two measurements both hold exactly the raw window (not whatever the last periodic fold left).
uint64_t UsedBytes(const std::string& path, const FoldPolicy& fold = {}) {
  absl::StatusOr<std::unique_ptr<flopscope::SqliteDb>> db = RankStore::OpenDatabase(path);
  if (!db.ok()) Die(std::string(db.status().message()));
  absl::StatusOr<flopscope::daemon::FoldOutcome> folded =
      flopscope::daemon::StepFolder::Fold(**db, fold);
  if (!folded.ok()) Die(std::string(folded.status().message()));
  uint64_t bytes = 0;
  absl::Status status = (*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  if (status.ok()) {
    status = (*db)->ForEachRow(
        "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM "
        "pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())",
        [&](const flopscope::SqliteStatement& row) {
          bytes = row.ColumnUint(0) * row.ColumnUint(1);
          return absl::OkStatus();
        });
  }
  if (!status.ok()) Die(std::string(status.message()));
  return bytes;
}

// Sends steps [first, last) to the store; the store stays open across calls.
class RankFeeder {
 public:
  RankFeeder(const Shape& shape, const std::string& path, const FoldPolicy& fold)
      : shape_(shape), base_ns_(absl::GetCurrentTimeNanos() - int64_t{3'600'000'000'000}) {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path, fold);
    if (!store.ok()) Die(std::string(store.status().message()));
    store_ = *std::move(store);
    absl::StatusOr<flopscope::daemon::SessionHandle> session = store_->OpenSession(Hello(base_ns_));
    if (!session.ok()) Die(std::string(session.status().message()));
    sid_ = session->sid;
  }

  void Feed(int first, int last) {
    for (int step = first; step < last; ++step) {
      v1::Batch batch;
      if (step == 0) AddDefinitions(shape_, &batch);
      StepBatch(shape_, base_ns_ + step * shape_.step_ms * 1'000'000, step, &batch).Write();
      batch.set_seq(uint64_t(step) + 1);
      if (absl::Status s = store_->Commit(sid_, batch); !s.ok()) Die(std::string(s.message()));
    }
  }
  void Close() { store_.reset(); }

 private:
  const Shape& shape_;
  const int64_t base_ns_;
  std::unique_ptr<RankStore> store_;
  int64_t sid_ = 0;
};

struct Figures {
  uint64_t raw_bytes = 0;
  uint64_t folded_half_bytes = 0;
  uint64_t folded_bytes = 0;
  double raw_feed_s = 0;     // committing every step, no folding
  double folded_feed_s = 0;  // the same with the store's periodic folds
  double one_fold_ms = 0;    // folding the raw file's old steps at once (the worst case)
};

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Folds the raw file's old steps in one go: what a daemon pays the first time it folds a file
// written without folding.
double TimeOneFold(const std::string& path, const FoldPolicy& fold) {
  absl::StatusOr<std::unique_ptr<flopscope::SqliteDb>> db = RankStore::OpenDatabase(path);
  if (!db.ok()) Die(std::string(db.status().message()));
  const absl::Time start = absl::Now();
  absl::StatusOr<flopscope::daemon::FoldOutcome> folded =
      flopscope::daemon::StepFolder::Fold(**db, fold);
  if (!folded.ok()) Die(std::string(folded.status().message()));
  return SecondsSince(start) * 1000;
}

Figures Measure(const Shape& shape, const std::string& dir) {
  Figures figures;
  const int half = shape.steps / 2;
  absl::Time start = absl::Now();
  RankFeeder raw(shape, dir + "/raw.sqlite", FoldPolicy{});
  raw.Feed(0, shape.steps);
  raw.Close();
  figures.raw_feed_s = SecondsSince(start);
  figures.raw_bytes = UsedBytes(dir + "/raw.sqlite");
  // Folds as often as flopscoped's stores do (FoldPolicy's default check_every_records).
  FoldPolicy fold;
  fold.keep_raw_steps = shape.keep_raw_steps;
  figures.one_fold_ms = TimeOneFold(dir + "/raw.sqlite", fold);
  RankFeeder folded(shape, dir + "/folded.sqlite", fold);
  start = absl::Now();
  folded.Feed(0, half);
  figures.folded_feed_s = SecondsSince(start);
  figures.folded_half_bytes = UsedBytes(dir + "/folded.sqlite", fold);
  start = absl::Now();
  folded.Feed(half, shape.steps);
  folded.Close();
  figures.folded_feed_s += SecondsSince(start);
  figures.folded_bytes = UsedBytes(dir + "/folded.sqlite", fold);
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  Shape shape;
  bool keep_data = false;
  CLI::App app("bench/storage_benchmark: rank file bytes per kernel and per step, raw and folded");
  app.add_option("--steps", shape.steps)->check(CLI::Range(2, 1'000'000));
  app.add_option("--kernels-per-step", shape.kernels_per_step)->check(CLI::Range(1, 100'000));
  app.add_option("--layers", shape.layers)->check(CLI::Range(1, 90));
  app.add_option("--ops-per-layer", shape.ops_per_layer)->check(CLI::Range(1, 90));
  app.add_option("--keep-raw-steps", shape.keep_raw_steps)->check(CLI::Range(1, 1'000'000));
  app.add_option("--step-ms", shape.step_ms)->check(CLI::Range(1, 60'000));
  app.add_flag("--keep-data", keep_data, "keep the two rank files (their path is printed)");
  CLI11_PARSE(app, argc, argv);
  if (shape.steps < 2 * shape.keep_raw_steps) {
    Die("--steps must be at least twice --keep-raw-steps, so the second half is steady state");
  }
  char pattern[] = "/tmp/flopscope-storage-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) Die("cannot create a temporary directory");
  const std::string dir = pattern;
  const Figures f = Measure(shape, dir);

  const double kernels = double(shape.steps) * shape.kernels_per_step;
  const double raw_per_step = double(f.raw_bytes) / shape.steps;
  const double second_half = shape.steps - shape.steps / 2;
  const double folded_per_step =
      (double(f.folded_bytes) - double(f.folded_half_bytes)) / second_half;
  const double steps_per_hour = 3600.0 * 1000.0 / double(shape.step_ms);
  const double projected_mb = folded_per_step * steps_per_hour / 1e6;
  std::printf(
      "shape: %d steps of %d kernels, %d layers x %d ops, a step per %lld ms, "
      "%lld steps kept raw\n",
      shape.steps, shape.kernels_per_step, shape.layers, shape.ops_per_layer,
      static_cast<long long>(shape.step_ms), static_cast<long long>(shape.keep_raw_steps));
  std::printf("raw file:    %12.1f MB  %8.1f bytes/kernel  %10.0f bytes/step\n", f.raw_bytes / 1e6,
              f.raw_bytes / kernels, raw_per_step);
  std::printf("folded file: %12.1f MB  %8.1f bytes/kernel  %10.0f bytes/step (steady growth)\n",
              f.folded_bytes / 1e6, folded_per_step / shape.kernels_per_step, folded_per_step);
  std::printf(
      "projected at this rate: raw %.1f MB, folded %.1f MB per rank and hour "
      "(target <= 50: %s)\n",
      raw_per_step * steps_per_hour / 1e6, projected_mb, projected_mb <= 50 ? "met" : "MISSED");
  std::printf(
      "commit time: %.1f s raw, %.1f s with periodic folds; the first fold of the raw file "
      "(%lld steps): %.0f ms\n",
      f.raw_feed_s, f.folded_feed_s,
      static_cast<long long>(std::min<int64_t>(shape.steps - shape.keep_raw_steps - 1,
                                               flopscope::daemon::kMaxStepsPerFold)),
      f.one_fold_ms);
  const double window_mb = double(shape.keep_raw_steps) * raw_per_step / 1e6;
  std::printf(
      "a week of this job: %.0f MB per rank (the raw window of %lld steps, ~%.0f MB, "
      "plus 168 hours of folded steps)\n",
      window_mb + projected_mb * 168, static_cast<long long>(shape.keep_raw_steps), window_mb);
  std::printf(
      "storage_bench: raw_bytes_per_kernel=%.1f raw_bytes_per_step=%.0f "
      "folded_bytes_per_step=%.0f projected_mb_per_rank_hour=%.1f\n",
      f.raw_bytes / kernels, raw_per_step, folded_per_step, projected_mb);
  if (keep_data) {
    std::printf("kept: %s\n", dir.c_str());
  } else {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  return 0;
}
