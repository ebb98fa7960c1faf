// transformer_nvtx: a small Transformer "training loop" that annotates itself with NVTX the way a
// framework does, for flopscope's demo and integration tests. It computes on the GPU with cuBLAS
// when built with CUDA and a device is present, else on the CPU (same shapes, scaled-down work).
//
// Options: --steps S (3) --layers L (2) --hidden H (256) --batch B (8) --seq T (128)
//          --vocab V (8192) --no-loader-thread --cpu (skip the GPU even when there is one)
// Prints one line at the end: "transformer_nvtx: S steps, L layers, cpu|gpu:<device name>".
//
// The NVTX it emits, per process (what the integration tests assert):
//
// Default domain, training (main) thread, push/pop, with call counts:
//   TransformerLM                            2·S   (forward and backward)
//     embedding                              2·S
//     layers.<i>        for i in 0..L-1      2·S each
//       self_attn                            2·S each
//       mlp                                  2·S each
//     head                                   2·S
//   AdamW                                    S     (a root of its own)
// Default domain, data-loader thread (absent with --no-loader-thread), push/pop:
//   DataLoader                               S
//     next_batch                             S
// So the module paths are TransformerLM, TransformerLM/embedding, TransformerLM/layers.<i>,
// TransformerLM/layers.<i>/self_attn, TransformerLM/layers.<i>/mlp, TransformerLM/head (3 + 3·L
// paths, each 2·S calls), AdamW (S calls) and DataLoader, DataLoader/next_batch (S calls each).
//
// Push order within one step:
//   forward:  TransformerLM{ embedding, layers.0{ self_attn, mlp }, …, layers.L-1{…}, head }
//   backward: TransformerLM{ head, layers.L-1{ mlp, self_attn }, …, layers.0{…}, embedding }
//   optimizer: AdamW
//
// "flopscope" domain (nvtxDomainCreateA("flopscope")), main thread, push/pop, S calls each:
//   step > forward, step > backward, step > optimizer; forward encloses the forward
//   TransformerLM range, backward the backward one, optimizer the AdamW range. The batch is taken
//   from the loader inside step, before forward.
// "flopscope" domain marks, once, before the first step and outside every range:
//   batch_size=<B>, the module tree as print(model) has it (`module`, `class`, `extra_repr` marks
//   of ModuleTree in parameter_counts.h: the layers in a ModuleList `TransformerLM/layers`), then
//   "params <path>=<count>" for TransformerLM and every module path under it (3 + 3·L marks),
//   depth-first (formulas in parameter_counts.h; e.g. H=256, V=8192, L=2: TransformerLM=5'771'776),
//   then "estimated_macs <path>=<n>" and "estimated_flops <path>=<2n>" for the same paths (forward,
//   per step, the work the backend does: ForwardMacs), so a report shows FLOPs, MACs and FLOPS
//   labelled estimated without a GPU (docs/marks.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "examples/transformer_nvtx/compute_backend.h"
#include "examples/transformer_nvtx/data_loader.h"
#include "examples/transformer_nvtx/model_config.h"
#include "examples/transformer_nvtx/nvtx_ranges.h"
#include "examples/transformer_nvtx/parameter_counts.h"
#include "examples/transformer_nvtx/transformer_model.h"

namespace transformer_nvtx {
namespace {

// A mark value cannot hold '=' (the key ends at the last one): extra_repr escapes it.
std::string MarkValue(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '%' ? "%25" : c == '=' ? "%3D" : std::string(1, c);
  return out;
}

void AnnounceModel(const ModelConfig& config, const ComputeBackend& backend) {
  AnnounceMetadata("batch_size=" + std::to_string(config.batch));
  const std::vector<ModuleDescription> tree = ModuleTree(config);
  for (size_t index = 0; index < tree.size(); ++index) {
    const ModuleDescription& module = tree[index];
    const std::string parent = module.parent.empty() ? "" : " " + module.parent;
    AnnounceMetadata("module " + module.path + "=" + std::to_string(index) + parent);
    AnnounceMetadata("class " + module.path + "=" + module.class_name);
    if (!module.extra_repr.empty()) {
      AnnounceMetadata("extra_repr " + module.path + "=" + MarkValue(module.extra_repr));
    }
  }
  for (const ModuleParams& module : ModuleParameterCounts(config)) {
    AnnounceMetadata("params " + module.path + "=" + std::to_string(module.count));
  }
  // FLOPs from the shapes, as DeepSpeed's profiler gets them (of the work the backend really
  // does): the report labels them estimated.
  for (const TransformerModel::ModuleMacs& module :
       TransformerModel::ForwardMacs(config, backend)) {
    AnnounceMetadata("estimated_macs " + module.path + "=" + std::to_string(module.macs));
    AnnounceMetadata("estimated_flops " + module.path + "=" + std::to_string(2 * module.macs));
  }
}

void Train(const ModelConfig& config, ComputeBackend& backend) {
  TransformerModel model(config, backend);
  std::optional<DataLoader> loader;
  if (config.loader_thread) loader.emplace(config.steps, config.tokens());
  AnnounceModel(config, backend);
  for (int step = 0; step < config.steps; ++step) {
    ScopedPhaseRange step_range("step");
    const Batch batch = loader ? loader->Next() : DataLoader::MakeBatch(step, config.tokens());
    {
      ScopedPhaseRange phase("forward");
      model.Forward();
    }
    {
      ScopedPhaseRange phase("backward");
      model.Backward();
    }
    {
      ScopedPhaseRange phase("optimizer");
      model.OptimizerStep();
      backend.Synchronize();  // like loss.item(): the step ends when the GPU is done
    }
  }
}

}  // namespace
}  // namespace transformer_nvtx

int main(int argc, char** argv) {
  transformer_nvtx::ModelConfig config;
  CLI::App app{"A Transformer-shaped training loop annotated with NVTX (flopscope example)"};
  app.add_option("--steps", config.steps, "training steps")->check(CLI::Range(1, 1'000'000));
  app.add_option("--layers", config.layers, "Transformer layers")->check(CLI::Range(1, 1024));
  app.add_option("--hidden", config.hidden, "hidden size H")->check(CLI::Range(1, 65536));
  app.add_option("--batch", config.batch, "sequences per batch B")->check(CLI::Range(1, 65536));
  app.add_option("--seq", config.seq, "tokens per sequence")->check(CLI::Range(1, 65536));
  app.add_option("--vocab", config.vocab, "vocabulary size V")->check(CLI::Range(1, 1 << 20));
  bool no_loader_thread = false;
  app.add_flag("--no-loader-thread", no_loader_thread, "make batches on the training thread");
  app.add_flag("--cpu", config.force_cpu, "compute on the CPU even when a GPU is present");
  CLI11_PARSE(app, argc, argv);
  config.loader_thread = !no_loader_thread;
  if (config.tokens() > (int64_t{1} << 24)) {
    std::fprintf(stderr, "transformer_nvtx: --batch × --seq is %lld tokens; at most %lld\n",
                 static_cast<long long>(config.tokens()), 1LL << 24);
    return 2;
  }

  std::unique_ptr<transformer_nvtx::ComputeBackend> backend = transformer_nvtx::MakeComputeBackend(
      config, transformer_nvtx::TransformerModel::LargestOperand(config));
  transformer_nvtx::Train(config, *backend);
  std::printf("transformer_nvtx: %d steps, %d layers, %s\n", config.steps, config.layers,
              backend->Describe().c_str());
  return 0;
}
