#include "common/metadata_keys.h"

#include "gtest/gtest.h"

namespace flopscope {
namespace {

TEST(MetadataKeysTest, EveryPerModuleKeyOfTheMarksPageIsOne) {
  for (const char* key :
       {"module m/a", "class m/a", "params m/a", "extra_repr m/a", "range_module r/a", "flops m/a",
        "macs m/a", "estimated_flops m/a", "estimated_macs m/a", "params_shard m/a",
        "deepspeed_differs m/a", "compiled m/a"}) {
    EXPECT_TRUE(IsPerModuleKey(key)) << key;
  }
}

TEST(MetadataKeysTest, JobAndInjectorKeysAreNot) {
  // The prefix needs its space: "modules" or "classes" name nothing per module.
  for (const char* key : {"batch_size", "precision", "parallel", "gpu.status", "gpu.0.name",
                          "kernels.launch_not_seen", "modules", "classes x", "module", ""}) {
    EXPECT_FALSE(IsPerModuleKey(key)) << key;
  }
}

}  // namespace
}  // namespace flopscope
