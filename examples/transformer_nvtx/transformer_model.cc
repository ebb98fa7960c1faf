#include "examples/transformer_nvtx/transformer_model.h"

#include <algorithm>

#include "examples/transformer_nvtx/nvtx_ranges.h"
#include "examples/transformer_nvtx/parameter_counts.h"

namespace transformer_nvtx {

TransformerModel::TransformerModel(const ModelConfig& config, ComputeBackend& backend)
    : config_(config), backend_(backend) {
  for (int i = 0; i < config.layers; ++i) layer_names_.push_back("layers." + std::to_string(i));
}

std::vector<TransformerModel::GemmShape> TransformerModel::AttentionGemms(
    const ModelConfig& config) {
  const int64_t t = config.tokens(), h = config.hidden, s = config.seq;
  return {
      {t, 3 * h, h},  // fused Q, K, V projection
      {t, s, h},      // scores: per sequence Q·Kᵀ (S×S over H), for all B sequences
      {t, h, s},      // context: scores·V
      {t, h, h},      // output projection
  };
}

std::vector<TransformerModel::GemmShape> TransformerModel::MlpGemms(const ModelConfig& config) {
  const int64_t t = config.tokens(), h = config.hidden;
  return {{t, 4 * h, h}, {t, h, 4 * h}};
}

TransformerModel::GemmShape TransformerModel::HeadGemm(const ModelConfig& config) {
  return {config.tokens(), config.vocab, config.hidden};
}

int64_t TransformerModel::LargestOperand(const ModelConfig& config) {
  std::vector<GemmShape> all = AttentionGemms(config);
  for (const GemmShape& g : MlpGemms(config)) all.push_back(g);
  all.push_back(HeadGemm(config));
  int64_t largest = config.tokens() * config.hidden;  // embedding output
  for (const GemmShape& g : all) largest = std::max({largest, g.m * g.k, g.k * g.n, g.m * g.n});
  return std::max(largest, static_cast<int64_t>(TotalParameters(config)));
}

namespace {

int64_t MacsOf(const std::vector<TransformerModel::GemmShape>& gemms,
               const ComputeBackend& backend) {
  int64_t macs = 0;
  for (const TransformerModel::GemmShape& g : gemms) macs += backend.MultiplyAdds(g.m, g.n, g.k);
  return macs;
}

}  // namespace

std::vector<TransformerModel::ModuleMacs> TransformerModel::ForwardMacs(
    const ModelConfig& config, const ComputeBackend& backend) {
  const int64_t attention = MacsOf(AttentionGemms(config), backend);
  const int64_t mlp = MacsOf(MlpGemms(config), backend);
  const int64_t head = MacsOf({HeadGemm(config)}, backend);
  std::vector<ModuleMacs> macs = {{"TransformerLM", config.layers * (attention + mlp) + head},
                                  {"TransformerLM/embedding", 0}};
  for (int i = 0; i < config.layers; ++i) {
    const std::string layer = "TransformerLM/layers." + std::to_string(i);
    macs.push_back({layer, attention + mlp});
    macs.push_back({layer + "/self_attn", attention});
    macs.push_back({layer + "/mlp", mlp});
  }
  macs.push_back({"TransformerLM/head", head});
  return macs;
}

void TransformerModel::RunForward(Precision precision, const std::vector<GemmShape>& gemms) {
  for (const GemmShape& g : gemms) backend_.Gemm(precision, g.m, g.n, g.k);
}

void TransformerModel::RunBackward(Precision precision, const std::vector<GemmShape>& gemms) {
  for (auto g = gemms.rbegin(); g != gemms.rend(); ++g) {
    backend_.Gemm(precision, g->m, g->k, g->n);  // dX
    backend_.Gemm(precision, g->k, g->n, g->m);  // dW
  }
}

void TransformerModel::Forward() {
  ScopedModuleRange model("TransformerLM");
  {
    ScopedModuleRange embedding("embedding");
    backend_.Gather(config_.tokens(), config_.hidden);
  }
  for (const std::string& layer_name : layer_names_) {
    ScopedModuleRange layer(layer_name);
    {
      ScopedModuleRange attention("self_attn");
      RunForward(Precision::kFp32, AttentionGemms(config_));
    }
    {
      ScopedModuleRange mlp("mlp");
      RunForward(Precision::kFp16, MlpGemms(config_));
    }
  }
  ScopedModuleRange head("head");
  RunForward(Precision::kFp32, {HeadGemm(config_)});
}

void TransformerModel::Backward() {
  // Autograd visits modules in reverse; frameworks that annotate backward push the same names.
  ScopedModuleRange model("TransformerLM");
  {
    ScopedModuleRange head("head");
    RunBackward(Precision::kFp32, {HeadGemm(config_)});
  }
  for (auto layer_name = layer_names_.rbegin(); layer_name != layer_names_.rend(); ++layer_name) {
    ScopedModuleRange layer(*layer_name);
    {
      ScopedModuleRange mlp("mlp");
      RunBackward(Precision::kFp16, MlpGemms(config_));
    }
    {
      ScopedModuleRange attention("self_attn");
      RunBackward(Precision::kFp32, AttentionGemms(config_));
    }
  }
  ScopedModuleRange embedding("embedding");
  backend_.Gather(config_.tokens(), config_.hidden);  // scatter-add of the gradient rows
}

void TransformerModel::OptimizerStep() {
  ScopedModuleRange optimizer("AdamW");
  backend_.Axpy(static_cast<int64_t>(TotalParameters(config_)));
}

}  // namespace transformer_nvtx
