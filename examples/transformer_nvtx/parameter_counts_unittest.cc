#include "examples/transformer_nvtx/parameter_counts.h"

#include "gtest/gtest.h"

namespace transformer_nvtx {
namespace {

TEST(ModuleParameterCountsTest, ListsEveryModulePathDepthFirst) {
  ModelConfig config;
  config.layers = 2;
  const std::vector<ModuleParams> counts = ModuleParameterCounts(config);
  std::vector<std::string> paths;
  for (const ModuleParams& module : counts) paths.push_back(module.path);
  EXPECT_EQ(paths, (std::vector<std::string>{
                       "TransformerLM", "TransformerLM/embedding", "TransformerLM/layers.0",
                       "TransformerLM/layers.0/self_attn", "TransformerLM/layers.0/mlp",
                       "TransformerLM/layers.1", "TransformerLM/layers.1/self_attn",
                       "TransformerLM/layers.1/mlp", "TransformerLM/head"}));
}

TEST(ModuleParameterCountsTest, FollowsTheShapesOfATinyModel) {
  // H = 2, V = 3 worked by hand: embedding 3·2 = 6; attention 4·2·2 + 4·2 = 24;
  // mlp 2·4·2·2 + 5·2 = 42; layer 66; head 6; one layer in total 6 + 66 + 6 = 78.
  ModelConfig config;
  config.hidden = 2;
  config.vocab = 3;
  config.layers = 1;
  const std::vector<ModuleParams> counts = ModuleParameterCounts(config);
  ASSERT_EQ(counts.size(), 6u);
  EXPECT_EQ(counts[0].count, 78u);  // TransformerLM
  EXPECT_EQ(counts[1].count, 6u);   // embedding
  EXPECT_EQ(counts[2].count, 66u);  // layers.0
  EXPECT_EQ(counts[3].count, 24u);  // self_attn
  EXPECT_EQ(counts[4].count, 42u);  // mlp
  EXPECT_EQ(counts[5].count, 6u);   // head
  EXPECT_EQ(TotalParameters(config), 78u);
}

TEST(ModuleParameterCountsTest, ParentsAreTheSumOfTheirChildren) {
  ModelConfig config;
  config.layers = 3;
  config.hidden = 64;
  config.vocab = 1000;
  const std::vector<ModuleParams> counts = ModuleParameterCounts(config);
  uint64_t top_level_children = 0;
  for (size_t i = 1; i < counts.size(); ++i) {
    const std::string& path = counts[i].path;
    if (path.find('/', std::string("TransformerLM/").size()) == std::string::npos) {
      top_level_children += counts[i].count;
    }
    if (path.ends_with("/self_attn")) {
      EXPECT_EQ(counts[i - 1].count, counts[i].count + counts[i + 1].count) << counts[i - 1].path;
    }
  }
  EXPECT_EQ(counts[0].count, top_level_children);
}

TEST(ModuleTreeTest, EveryModuleWithItsParentAndTheLayersInAModuleList) {
  ModelConfig config;
  config.layers = 2;
  const std::vector<ModuleDescription> tree = ModuleTree(config);
  std::vector<std::string> ranged;  // the modules that run: those with parameter counts
  for (const ModuleDescription& module : tree) {
    if (module.class_name != "ModuleList") ranged.push_back(module.path);
  }
  std::vector<std::string> counted;
  for (const ModuleParams& module : ModuleParameterCounts(config)) counted.push_back(module.path);
  EXPECT_EQ(ranged, counted);
  EXPECT_EQ(tree[0].parent, "");
  EXPECT_EQ(tree[2].path, "TransformerLM/layers");
  for (const ModuleDescription& module : tree) {
    if (module.path.rfind("TransformerLM/layers.", 0) == 0 &&
        module.path.find('/', sizeof("TransformerLM/layers.")) == std::string::npos) {
      EXPECT_EQ(module.parent, "TransformerLM/layers") << module.path;
    }
    // Parents come before their children, as named_modules() lists them.
    bool parent_seen = module.parent.empty();
    for (const ModuleDescription& earlier : tree) {
      if (&earlier == &module) break;
      parent_seen |= earlier.path == module.parent;
    }
    EXPECT_TRUE(parent_seen) << module.path;
  }
}

}  // namespace
}  // namespace transformer_nvtx
