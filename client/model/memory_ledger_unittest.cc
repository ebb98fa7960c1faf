#include "client/model/memory_ledger.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using Metadata = google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>;

void AddMark(Metadata& metadata, const std::string& key, const std::string& value) {
  flopscope::v1::Metadata* entry = metadata.Add();
  entry->set_key(key);
  entry->set_value(value);
}

const MemoryPart& PartOf(const RankMemory& memory, const std::string& name) {
  for (const MemoryPart& part : memory.parts) {
    if (part.name == name) return part;
  }
  ADD_FAILURE() << "no part " << name;
  return memory.parts.front();
}

constexpr double kElements = 4223;

TEST(MemoryLedgerTest, DdpFp32AdamIsTwentyBytesPerElementWithBuckets) {
  Metadata metadata;
  AddMark(metadata, "memory_ledger 1",
          "step:1 setup:ddp dp:2 elements:4223 dtype:fp32 amp:0 states:2 bucket_view:0 "
          "params:16892 grads:16892 optimizer:33828 buckets:- rss_high_water:252030976 "
          "cost_us:150");
  const std::vector<RankMemory> ranks = ReadMemoryLedger(metadata);
  ASSERT_EQ(ranks.size(), 1u);
  const RankMemory& memory = ranks[0];
  EXPECT_EQ(memory.rank, 1);
  EXPECT_EQ(memory.step, 1);
  EXPECT_EQ(memory.setup, "ddp");
  EXPECT_EQ(memory.dp, 2);
  EXPECT_DOUBLE_EQ(*PartOf(memory, "params").expected, 4 * kElements);
  EXPECT_DOUBLE_EQ(*PartOf(memory, "grads").expected, 4 * kElements);
  EXPECT_DOUBLE_EQ(*PartOf(memory, "optimizer").expected, 8 * kElements);
  EXPECT_DOUBLE_EQ(*PartOf(memory, "buckets").expected, 4 * kElements);
  EXPECT_FALSE(PartOf(memory, "buckets").held);  // DDP's reducer: not reachable
  EXPECT_DOUBLE_EQ(*memory.ExpectedTotal(), 20 * kElements);
  EXPECT_DOUBLE_EQ(*memory.HeldTotal(), 16892 + 16892 + 33828);
  EXPECT_FALSE(memory.Flagged());
  EXPECT_DOUBLE_EQ(*memory.rss_high_water, 252030976);
  EXPECT_DOUBLE_EQ(*memory.cost_s, 150e-6);
}

TEST(MemoryLedgerTest, DdpWithBucketViewsAndAutocastIsMixedPrecisionsEighteen) {
  Metadata metadata;
  AddMark(metadata, "memory_ledger 0",
          "step:0 setup:ddp dp:4 elements:1000 dtype:fp32 amp:1 states:2 bucket_view:1 "
          "params:4000 grads:4000 optimizer:8000 buckets:0");
  const RankMemory memory = ReadMemoryLedger(metadata)[0];
  EXPECT_DOUBLE_EQ(*memory.ExpectedTotal(), 18 * 1000);
  EXPECT_DOUBLE_EQ(*PartOf(memory, "buckets").expected, 0);
}

TEST(MemoryLedgerTest, ZeroStagesDivideStatesThenGradsThenParams) {
  for (const auto& [setup, params, grads, optimizer] :
       {std::tuple{"zero1", 2.0, 2.0, 12.0 / 4}, std::tuple{"zero2", 2.0, 2.0 / 4, 12.0 / 4},
        std::tuple{"zero3", 2.0 / 4, 2.0 / 4, 12.0 / 4}}) {
    Metadata metadata;
    AddMark(metadata, "memory_ledger 3",
            std::string("step:5 setup:") + setup +
                " dp:4 elements:1000 dtype:fp16 amp:0 states:2 bucket_view:0 params:0 grads:0 "
                "optimizer:0 buckets:0");
    const RankMemory memory = ReadMemoryLedger(metadata)[0];
    SCOPED_TRACE(setup);
    EXPECT_DOUBLE_EQ(*PartOf(memory, "params").expected, params * 1000);
    EXPECT_DOUBLE_EQ(*PartOf(memory, "grads").expected, grads * 1000);
    EXPECT_DOUBLE_EQ(*PartOf(memory, "optimizer").expected, optimizer * 1000);
    EXPECT_FALSE(PartOf(memory, "buckets").expected);  // DeepSpeed's: no formula
  }
  // The ZeRO paper's baseline: 2 + 2 + 12 = 16 bytes per element, all divided at stage 3.
  Metadata metadata;
  AddMark(metadata, "memory_ledger 0",
          "setup:zero3 dp:8 elements:800 dtype:bf16 states:2 params:0 grads:0 optimizer:0");
  EXPECT_DOUBLE_EQ(*ReadMemoryLedger(metadata)[0].ExpectedTotal(), 16 * 800 / 8);
}

TEST(MemoryLedgerTest, Fsdp2ParamsThatDoNotShrinkAreFlagged) {
  Metadata metadata;
  // The root's own parameters left unsharded: 12604 bytes held where 16892 / 2 are expected.
  AddMark(metadata, "memory_ledger 1",
          "step:1 setup:fsdp2 dp:2 elements:4223 dtype:fp32 amp:0 states:2 bucket_view:0 "
          "params:12604 grads:12604 optimizer:25252 buckets:0");
  const RankMemory memory = ReadMemoryLedger(metadata)[0];
  EXPECT_DOUBLE_EQ(*PartOf(memory, "params").expected, 4 * kElements / 2);
  EXPECT_TRUE(PartOf(memory, "params").flagged);
  EXPECT_TRUE(PartOf(memory, "grads").flagged);
  EXPECT_TRUE(PartOf(memory, "optimizer").flagged);
  EXPECT_TRUE(memory.Flagged());
}

TEST(MemoryLedgerTest, WithinTheMarginIsNotFlagged) {
  Metadata metadata;
  // FSDP2's padding: 8512 held for 8446 expected (+0.8 %), and exactly the margin.
  const double at_margin = 8 * kElements / 2 * (1 + kMemoryMargin);
  AddMark(metadata, "memory_ledger 0",
          "setup:fsdp2 dp:2 elements:4223 dtype:fp32 states:2 params:8512 grads:8512 "
          "optimizer:" +
              std::to_string(static_cast<long long>(at_margin)));
  const RankMemory memory = ReadMemoryLedger(metadata)[0];
  EXPECT_FALSE(memory.Flagged());
}

TEST(MemoryLedgerTest, TheLastLedgerOfARankWinsAndPeaksKeepTheHighest) {
  Metadata metadata;
  AddMark(metadata, "memory_ledger 0", "step:0 setup:ddp dp:2 elements:10 params:40");
  AddMark(metadata, "memory_peak 0", "step:0 allocated:1000 reserved:2048 forward:900");
  AddMark(metadata, "memory_peak 0",
          "step:3 allocated:1500 reserved:2000 backward:1400 activations:700");
  AddMark(metadata, "memory_peak 0", "step:4 allocated:1200 reserved:4096 forward:1100");
  AddMark(metadata, "memory_ledger 0", "step:100 setup:ddp dp:2 elements:10 params:44");
  AddMark(metadata, "memory_peak 2", "step:1 allocated:10 reserved:20");
  const std::vector<RankMemory> ranks = ReadMemoryLedger(metadata);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].step, 100);
  EXPECT_DOUBLE_EQ(*PartOf(ranks[0], "params").held, 44);
  EXPECT_DOUBLE_EQ(*ranks[0].peak_allocated, 1500);
  EXPECT_EQ(ranks[0].peak_step, 3);
  EXPECT_DOUBLE_EQ(*ranks[0].peak_reserved, 4096);
  EXPECT_DOUBLE_EQ(ranks[0].phase_peaks.at("forward"), 1100);
  EXPECT_DOUBLE_EQ(ranks[0].phase_peaks.at("backward"), 1400);
  EXPECT_DOUBLE_EQ(*ranks[0].activations, 700);
  EXPECT_EQ(ranks[1].rank, 2);
  EXPECT_TRUE(ranks[1].setup.empty());  // peaks alone: no formula
  EXPECT_TRUE(ranks[1].parts.empty());
}

TEST(MemoryLedgerTest, MalformedMarksAreIgnored) {
  Metadata metadata;
  AddMark(metadata, "memory_ledger x", "setup:ddp params:1");
  AddMark(metadata, "memory_ledger -1", "setup:ddp params:1");
  AddMark(metadata, "memory_ledger 0",
          "setup:ddp dp:0 elements:nan params:-5 grads:1e400 optimizer:abc buckets");
  const std::vector<RankMemory> ranks = ReadMemoryLedger(metadata);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].dp, 1);
  EXPECT_EQ(ranks[0].elements, 0);
  for (const MemoryPart& part : ranks[0].parts) EXPECT_FALSE(part.held) << part.name;
}

TEST(MemoryLedgerTest, ModuleActivationsTheLastWellFormedMarkOfARank) {
  Metadata metadata;
  AddMark(metadata, "memory_activations 2",
          "step:0 modules:3 rest:0 Net:1140 Net/a:1000 Net/b%20c%3D1%25:-8");
  AddMark(metadata, "memory_activations 2",
          "step:3 modules:7 rest:-12 Net:2286 Net/a:2006 a:b/c:5");
  AddMark(metadata, "memory_activations 2", "step:6 modules:1 rest:0 Net:oops");  // ignored
  const std::vector<RankMemory> ranks = ReadMemoryLedger(metadata);
  ASSERT_EQ(ranks.size(), 1u);
  const RankMemory& memory = ranks[0];
  EXPECT_EQ(memory.rank, 2);
  EXPECT_EQ(memory.setup, "");  // activations alone: no ledger
  EXPECT_EQ(memory.activations_step, 3);
  EXPECT_EQ(memory.activation_modules, 7);
  EXPECT_DOUBLE_EQ(memory.activations_rest, -12);
  ASSERT_EQ(memory.module_activations.size(), 3u);
  EXPECT_EQ(memory.module_activations[0].path, "Net");
  EXPECT_DOUBLE_EQ(memory.module_activations[0].bytes, 2286);
  EXPECT_EQ(memory.module_activations[2].path, "a:b/c");  // split at the last ':'
  EXPECT_DOUBLE_EQ(memory.module_activations[2].bytes, 5);
  EXPECT_TRUE(IsMemoryLedgerKey("memory_activations 2"));

  Metadata first;
  AddMark(first, "memory_activations 0",
          "step:0 modules:3 rest:0 Net:1140 Net/a:1000 Net/b%20c%3D1%25:-8");
  const RankMemory decoded = ReadMemoryLedger(first)[0];
  ASSERT_EQ(decoded.module_activations.size(), 3u);
  EXPECT_EQ(decoded.module_activations[2].path, "Net/b c=1%");
  EXPECT_DOUBLE_EQ(decoded.module_activations[2].bytes, -8);
}

TEST(MemoryLedgerTest, MalformedModuleActivationsAreIgnored) {
  std::string too_many = "step:1 modules:100 rest:0";
  for (size_t i = 0; i <= kMaxActivationModules; ++i) too_many += " m" + std::to_string(i) + ":1";
  for (const std::string& value :
       {std::string(""), std::string("step:1 modules:1"), std::string("modules:1 step:1 rest:0"),
        std::string("step:-1 modules:1 rest:0 a:1"), std::string("step:1 modules:0 rest:0 a:1"),
        std::string("step:1 modules:1 rest:0 :5"), std::string("step:1 modules:1 rest:0 a"),
        std::string("step:1 modules:1 rest:0 a:1.5"),
        std::string("step:1 modules:1 rest:0 a:99999999999999999999"), too_many,
        "step:1 modules:1 rest:0 " + std::string(40 * 1024, 'x') + ":1"}) {
    Metadata metadata;
    AddMark(metadata, "memory_activations 0", value);
    AddMark(metadata, "memory_activations x", "step:1 modules:1 rest:0 a:1");
    const std::vector<RankMemory> ranks = ReadMemoryLedger(metadata);
    ASSERT_EQ(ranks.size(), 1u) << value;
    EXPECT_EQ(ranks[0].activations_step, -1) << value;
    EXPECT_TRUE(ranks[0].module_activations.empty()) << value;
  }
}

TEST(MemoryLedgerTest, SetupNames) {
  EXPECT_EQ(SetupName("ddp"), "DDP");
  EXPECT_EQ(SetupName("fsdp2"), "FSDP2");
  EXPECT_EQ(SetupName("zero3"), "ZeRO-3");
  EXPECT_EQ(SetupName("zero0"), "DeepSpeed without ZeRO");
  EXPECT_EQ(SetupName("single"), "one replica");
}

}  // namespace
}  // namespace flopscope::client
