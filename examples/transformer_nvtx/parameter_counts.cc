#include "examples/transformer_nvtx/parameter_counts.h"

namespace transformer_nvtx {

std::vector<ModuleParams> ModuleParameterCounts(const ModelConfig& config) {
  const uint64_t h = static_cast<uint64_t>(config.hidden);
  const uint64_t v = static_cast<uint64_t>(config.vocab);
  const uint64_t embedding = v * h;
  const uint64_t attention = 4 * h * h + 4 * h;
  const uint64_t mlp = 2 * 4 * h * h + 5 * h;
  const uint64_t layer = attention + mlp;
  const uint64_t head = h * v;
  const uint64_t total = embedding + static_cast<uint64_t>(config.layers) * layer + head;

  std::vector<ModuleParams> counts = {{"TransformerLM", total},
                                      {"TransformerLM/embedding", embedding}};
  for (int i = 0; i < config.layers; ++i) {
    const std::string layer_path = "TransformerLM/layers." + std::to_string(i);
    counts.push_back({layer_path, layer});
    counts.push_back({layer_path + "/self_attn", attention});
    counts.push_back({layer_path + "/mlp", mlp});
  }
  counts.push_back({"TransformerLM/head", head});
  return counts;
}

uint64_t TotalParameters(const ModelConfig& config) {
  return ModuleParameterCounts(config).front().count;
}

std::vector<ModuleDescription> ModuleTree(const ModelConfig& config) {
  const std::string h = std::to_string(config.hidden);
  const std::string v = std::to_string(config.vocab);
  const std::string root = "TransformerLM";
  const std::string list = root + "/layers";
  std::vector<ModuleDescription> tree = {{root, "", "TransformerLM", ""},
                                         {root + "/embedding", root, "Embedding", v + ", " + h},
                                         {list, root, "ModuleList", ""}};
  for (int i = 0; i < config.layers; ++i) {
    const std::string layer = root + "/layers." + std::to_string(i);
    tree.push_back({layer, list, "TransformerBlock", ""});
    tree.push_back({layer + "/self_attn", layer, "SelfAttention", ""});
    tree.push_back({layer + "/mlp", layer, "MLP", ""});
  }
  tree.push_back({root + "/head", root, "Linear",
                  "in_features=" + h + ", out_features=" + v + ", bias=False"});
  return tree;
}

}  // namespace transformer_nvtx
