#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/transformer_nvtx/model_config.h"

namespace transformer_nvtx {

struct ModuleParams {
  std::string path;  // NVTX range names from the root joined by '/', e.g. "TransformerLM/head"
  uint64_t count;
};

// Parameter counts of every module under TransformerLM, depth-first, from the model's shapes
// (H = hidden, V = vocab; biases included, layer norms left out of this toy model):
//   embedding        V·H                   token embedding table
//   self_attn        4·H·H + 4·H           Q, K, V and output projections with biases
//   mlp              2·4·H·H + 5·H         H→4H (+4H bias) and 4H→H (+H bias)
//   head             H·V                   untied output projection, no bias
//   layers.<i>       self_attn + mlp
//   TransformerLM    embedding + Σ layers.<i> + head
std::vector<ModuleParams> ModuleParameterCounts(const ModelConfig& config);

// The parameters the optimizer updates: TransformerLM's count.
uint64_t TotalParameters(const ModelConfig& config);

// The model as `print(model)` would show it, for the `module` / `class` / `extra_repr` marks
// (docs/marks.md): every module in model order, containers included. The layers sit in a
// ModuleList, `TransformerLM/layers`, that adds no component to its children's paths (it runs no
// forward of its own), so its children keep the range paths `TransformerLM/layers.<i>`.
struct ModuleDescription {
  std::string path;
  std::string parent;  // "" for the root
  std::string class_name;
  std::string extra_repr;  // "" for none; written as torch's extra_repr() would be
};
std::vector<ModuleDescription> ModuleTree(const ModelConfig& config);

}  // namespace transformer_nvtx
