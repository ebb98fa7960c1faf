#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/transformer_nvtx/compute_backend.h"
#include "examples/transformer_nvtx/model_config.h"

namespace transformer_nvtx {

// A decoder-only Transformer as a training framework would run it, reduced to the NVTX ranges a
// framework emits around its modules and the matrix products those modules perform. Forward and
// backward push the same module paths (backward in reverse order), so each module path is
// entered twice per step; the optimizer is a root range of its own. See main.cc for the tree.
class TransformerModel {
 public:
  TransformerModel(const ModelConfig& config, ComputeBackend& backend);

  void Forward();
  void Backward();
  void OptimizerStep();

  // The most elements any one matrix of forward or backward holds (sizes GPU buffers).
  static int64_t LargestOperand(const ModelConfig& config);

  // Forward multiply-accumulates of every module path (as in parameter_counts.h, depth-first),
  // summed over the products its forward runs as `backend` performs them (MultiplyAdds: the CPU
  // backend scales large products down), its submodules' included; FLOPs are 2 × MACs,
  // DeepSpeed's rule for matmul and bias-free linear. Where nothing is scaled, with
  // T = batch·seq tokens, H = hidden, S = seq, V = vocab:
  //   embedding 0 (a lookup); self_attn T·(4·H² + 2·S·H) (Q, K, V and output projections, the
  //   scores and the context); mlp 8·T·H²; head T·H·V; layers.<i> self_attn + mlp.
  struct ModuleMacs {
    std::string path;
    int64_t macs;
  };
  static std::vector<ModuleMacs> ForwardMacs(const ModelConfig& config,
                                             const ComputeBackend& backend);

  // One matrix product: m×k times k×n.
  struct GemmShape {
    int64_t m, n, k;
  };

 private:
  // The products of one module's forward pass, in order.
  static std::vector<GemmShape> AttentionGemms(const ModelConfig& config);
  static std::vector<GemmShape> MlpGemms(const ModelConfig& config);
  static GemmShape HeadGemm(const ModelConfig& config);

  void RunForward(Precision precision, const std::vector<GemmShape>& gemms);
  // For Y = X·W: dX = dY·Wᵀ and dW = Xᵀ·dY, for each product in reverse order.
  void RunBackward(Precision precision, const std::vector<GemmShape>& gemms);

  const ModelConfig config_;
  ComputeBackend& backend_;
  std::vector<std::string> layer_names_;  // "layers.0", ... built once, not per step
};

}  // namespace transformer_nvtx
