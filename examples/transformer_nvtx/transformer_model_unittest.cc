// ForwardMacs: the forward MACs the example announces, against the closed formulas of its header.
#include "examples/transformer_nvtx/transformer_model.h"

#include <string>
#include <vector>

#include "examples/transformer_nvtx/cpu_backend.h"
#include "examples/transformer_nvtx/parameter_counts.h"
#include "gtest/gtest.h"

namespace transformer_nvtx {
namespace {

TEST(ForwardMacsTest, FollowTheClosedFormulasForEveryModule) {
  ModelConfig config;
  config.layers = 3;
  config.hidden = 24;
  config.seq = 10;
  config.batch = 2;
  config.vocab = 50;
  const int64_t t = config.tokens(), h = config.hidden, s = config.seq, v = config.vocab;
  const int64_t attention = t * (4 * h * h + 2 * s * h);
  const int64_t mlp = 8 * t * h * h;
  const int64_t head = t * h * v;
  const CpuBackend unscaled(head * 4);  // the largest product fits: nothing scaled
  for (const TransformerModel::ModuleMacs& module :
       TransformerModel::ForwardMacs(config, unscaled)) {
    const std::string& path = module.path;
    int64_t expected = 0;
    if (path == "TransformerLM") {
      expected = config.layers * (attention + mlp) + head;
    } else if (path.ends_with("/self_attn")) {
      expected = attention;
    } else if (path.ends_with("/mlp")) {
      expected = mlp;
    } else if (path.ends_with("/head")) {
      expected = head;
    } else if (path.find("/layers.") != std::string::npos) {
      expected = attention + mlp;
    }
    EXPECT_EQ(module.macs, expected) << path;
  }
}

TEST(ForwardMacsTest, NamesTheSamePathsAsTheParameterCounts) {
  ModelConfig config;
  config.layers = 2;
  std::vector<std::string> flops_paths, params_paths;
  const CpuBackend backend;
  for (const auto& module : TransformerModel::ForwardMacs(config, backend)) {
    flops_paths.push_back(module.path);
  }
  for (const auto& module : ModuleParameterCounts(config)) params_paths.push_back(module.path);
  EXPECT_EQ(flops_paths, params_paths);
}

TEST(ForwardMacsTest, CountTheWorkAScaledDownBackendReallyDoes) {
  ModelConfig config;  // the default model: the CPU backend scales its products down
  const CpuBackend backend;
  const int64_t t = config.tokens(), h = config.hidden, v = config.vocab;
  const std::vector<TransformerModel::ModuleMacs> macs =
      TransformerModel::ForwardMacs(config, backend);
  const CpuBackend::Shape head = backend.Scaled(t, v, h);
  EXPECT_EQ(macs.back().path, "TransformerLM/head");
  EXPECT_EQ(macs.back().macs, head.m * head.n * head.k);
  EXPECT_LT(macs.back().macs, t * v * h);
}

}  // namespace
}  // namespace transformer_nvtx
