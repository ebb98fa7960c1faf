#include "client/text/memory_view.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/testing/json_parse_for_test.h"
#include "client/text/human_format.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using Metadata = google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>;

std::vector<RankMemory> Ledgers(const std::vector<std::pair<std::string, std::string>>& marks) {
  Metadata metadata;
  for (const auto& [key, value] : marks) {
    flopscope::v1::Metadata* entry = metadata.Add();
    entry->set_key(key);
    entry->set_value(value);
  }
  return ReadMemoryLedger(metadata);
}

// Two FSDP2 ranks: rank 1's root parameters were left unsharded.
std::vector<RankMemory> TwoFsdpRanks() {
  return Ledgers({{"memory_ledger 0",
                   "step:1 setup:fsdp2 dp:2 elements:4223 dtype:fp32 states:2 params:8512 "
                   "grads:8512 optimizer:17068 buckets:0 rss_high_water:743645184"},
                  {"memory_ledger 1",
                   "step:1 setup:fsdp2 dp:2 elements:4223 dtype:fp32 states:2 params:12604 "
                   "grads:8512 optimizer:16804 buckets:0 rss_high_water:743305216"}});
}

TEST(MemoryViewTest, FlagLineNamesThePartTheFormulaAndTheExcess) {
  const std::vector<RankMemory> ranks = TwoFsdpRanks();
  const MemoryPart& params = ranks[1].parts[0];
  ASSERT_TRUE(params.flagged);
  EXPECT_EQ(MemoryFlagLine(ranks[1], params),
            "params: " + FormatBytes(12604) + " held, the FSDP2 formula expects " +
                FormatBytes(8446) + " (4 B x " + FormatCount(4223) + " elements / dp 2): +49%");
  EXPECT_EQ(MemoryFormula(ranks[0], ranks[0].parts[3]), "not in the formula");
}

TEST(MemoryViewTest, SectionHasARowPerRankTheFlagsAndWhatTheCpuCannotSay) {
  const std::string text = MemoryLedgerSection(TwoFsdpRanks());
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 6u) << text;
  EXPECT_TRUE(lines[0].starts_with("Memory per rank")) << text;
  EXPECT_NE(lines[3].find("FSDP2 dp=2"), std::string::npos) << text;
  EXPECT_NE(lines[4].find(FormatBytes(12604) + " !"), std::string::npos) << text;
  EXPECT_EQ(lines[5], "  rank 1 " + MemoryFlagLine(TwoFsdpRanks()[1], TwoFsdpRanks()[1].parts[0]));
  EXPECT_NE(text.find("peaks: not measured on the CPU"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 " + FormatBytes(743645184)), std::string::npos) << text;
  EXPECT_EQ(MemoryLedgerSection({}), "");
}

TEST(MemoryViewTest, DdpsUnreachableBucketsAreSaidAndGpuPeaksShown) {
  const std::string text = MemoryLedgerSection(Ledgers(
      {{"memory_ledger 0",
        "setup:ddp dp:2 elements:10 dtype:fp32 states:2 params:40 grads:40 optimizer:80 "
        "buckets:-"},
       {"memory_peak 0", "step:2 allocated:5000 reserved:8192 forward:4000 activations:3000"}}));
  EXPECT_NE(text.find("buckets -: DDP's reducer"), std::string::npos) << text;
  EXPECT_EQ(text.find("not measured on the CPU"), std::string::npos) << text;
  EXPECT_NE(text.find(FormatBytes(8192)), std::string::npos) << text;
  EXPECT_NE(text.find("activations the forward left allocated for backward (most of a step): "
                      "rank 0 " +
                      FormatBytes(3000)),
            std::string::npos)
      << text;
}

TEST(MemoryViewTest, RanksWithTheSameFlagShareALine) {
  std::vector<std::pair<std::string, std::string>> marks;
  for (int rank : {0, 1, 2, 3, 5, 7, 8}) {
    marks.push_back({"memory_ledger " + std::to_string(rank),
                     "setup:zero3 dp:8 elements:800 dtype:fp32 states:2 params:" +
                         std::string(rank == 8 ? "900" : "800") + " grads:400 optimizer:1200"});
  }
  const std::vector<RankMemory> ranks = Ledgers(marks);
  const std::vector<std::string> lines = MemoryFlagLines(ranks);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "ranks 0-3, 5, 7 " + MemoryFlagLine(ranks[0], ranks[0].parts[0]));
  EXPECT_EQ(lines[1], "rank 8 " + MemoryFlagLine(ranks[6], ranks[6].parts[0]));
}

TEST(MemoryViewTest, ManyRanksShowTheFlaggedAndTheExtremes) {
  std::vector<std::pair<std::string, std::string>> marks;
  for (int rank = 0; rank < 40; ++rank) {
    const int params = rank == 7 ? 9000 : 1000 + rank;  // 4000 expected
    marks.push_back({"memory_ledger " + std::to_string(rank),
                     "setup:zero3 dp:40 elements:40000 dtype:fp32 states:2 params:" +
                         std::to_string(params) + " grads:0 optimizer:0"});
  }
  const std::string text = MemoryLedgerSection(Ledgers(marks));
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  // Heading, header, rule; rank 0 (least), rank 7 (flagged, most); the note, the flag, peaks,
  // the CPU's line on per-module activations.
  EXPECT_EQ(lines.size(), 9u) << text;
  EXPECT_NE(text.find("(40 ranks: the flagged ones"), std::string::npos) << text;
}

TEST(MemoryViewTest, ActivationsPerModuleTheMostOfAnyRankWithItsRank) {
  std::string many = "step:3 modules:12 rest:7 Net:900";
  for (int i = 0; i < 11; ++i) many += " Net/l" + std::to_string(i) + ":" + std::to_string(10 + i);
  const std::vector<RankMemory> ranks =
      Ledgers({{"memory_peak 0", "step:0 allocated:5000 reserved:8192"},
               {"memory_activations 0", "step:0 modules:3 rest:0 Net:1140 Net/a:1000 Net/b:-40"},
               {"memory_peak 1", "step:0 allocated:5000 reserved:8192"},
               {"memory_activations 1", many}});
  const std::string text = MemoryLedgerSection(ranks);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  auto at = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.starts_with("  Activations per module");
  });
  ASSERT_NE(at, lines.end()) << text;
  const std::vector<std::string> table(at + 1, lines.end());
  ASSERT_EQ(table.size(), 2u + kActivationRowsShown + 1) << text;  // header, rule, rows, count
  auto cells = [](const std::string& line) -> std::vector<std::string> {
    return absl::StrSplit(line, ' ', absl::SkipEmpty());
  };
  EXPECT_EQ(cells(table[0])[0], "module");
  // Net: 1140 on rank 0 beats 900 on rank 1; Net/a next; then rank 1's layers, the most first.
  EXPECT_EQ(cells(table[2])[0], "Net");
  EXPECT_NE(table[2].find(FormatBytes(1140)), std::string::npos) << text;
  EXPECT_EQ(cells(table[2]).back(), "0");                       // step
  EXPECT_EQ(cells(table[2])[cells(table[2]).size() - 2], "0");  // rank
  EXPECT_EQ(cells(table[3])[0], "Net/a");
  EXPECT_EQ(cells(table[4])[0], "Net/l10");
  EXPECT_EQ(cells(table[4]).back(), "3");
  EXPECT_EQ(cells(table[4])[cells(table[4]).size() - 2], "1");
  EXPECT_EQ(table.back(), "  (" + std::to_string(kActivationRowsShown) + " of 12 modules shown)");
  EXPECT_EQ(text.find(kActivationsCpuLine), std::string::npos) << text;

  // A forward that freed more than it kept.
  const std::string freed =
      MemoryLedgerSection(Ledgers({{"memory_peak 0", "step:0 allocated:5000 reserved:8192"},
                                   {"memory_activations 0", "step:0 modules:1 rest:0 Net/b:-40"}}));
  EXPECT_NE(freed.find("-" + FormatBytes(40)), std::string::npos) << freed;
}

TEST(MemoryViewTest, ActivationsPerModuleOnTheCpuIsOneLineSayingWhy) {
  const std::string text = MemoryLedgerSection(TwoFsdpRanks());
  EXPECT_NE(text.find("  " + std::string(kActivationsCpuLine) + "\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Activations per module"), std::string::npos) << text;
  // A GPU rank without the mark (hooks of before, a compiled model) says nothing about it.
  const std::string gpu =
      MemoryLedgerSection(Ledgers({{"memory_peak 0", "step:0 allocated:5000 reserved:8192"}}));
  EXPECT_EQ(gpu.find(kActivationsCpuLine), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("Activations per module"), std::string::npos) << gpu;
}

TEST(MemoryViewTest, CellAndJson) {
  const std::vector<RankMemory> ranks = TwoFsdpRanks();
  EXPECT_EQ(MemoryCell({ranks[1]}), FormatBytes(12604 + 8512 + 16804 + 0) + " / " +
                                        FormatBytes(8446 + 8446 + 16892) + " !");
  EXPECT_EQ(MemoryCell({}), "-");
  JsonWriter json;
  WriteMemoryJson(ranks[1], json);
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json.Finish());
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  const std::map<std::string, std::string>& document = *flat;
  EXPECT_EQ(document.at("setup"), "\"fsdp2\"");
  EXPECT_EQ(document.at("parts.params.held"), "12604");
  EXPECT_EQ(document.at("parts.params.expected"), "8446");
  EXPECT_EQ(document.at("parts.params.flagged"), "true");
  EXPECT_EQ(document.at("parts.params.divided"), "true");
  EXPECT_EQ(document.at("parts.buckets.expected"), "null");
  EXPECT_EQ(document.at("flagged"), "true");
  EXPECT_EQ(document.at("flags#"), "1");
  EXPECT_EQ(document.at("peak_allocated"), "null");
  EXPECT_EQ(document.at("rss_high_water"), "743305216");
  EXPECT_EQ(document.at("module_activations"), "null");

  JsonWriter gpu;
  WriteMemoryJson(
      Ledgers({{"memory_activations 3", "step:6 modules:4 rest:-2 Net:90 Net/a:-5"}})[0], gpu);
  flat = testing::FlattenJson(gpu.Finish());
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("module_activations.step"), "6");
  EXPECT_EQ(flat->at("module_activations.modules"), "4");
  EXPECT_EQ(flat->at("module_activations.rest"), "-2");
  EXPECT_EQ(flat->at("module_activations.top#"), "2");
  EXPECT_EQ(flat->at("module_activations.top[1].path"), "\"Net/a\"");
  EXPECT_EQ(flat->at("module_activations.top[1].bytes"), "-5");
}

}  // namespace
}  // namespace flopscope::client
