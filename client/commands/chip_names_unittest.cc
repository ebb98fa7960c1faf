// The marketing-name table of chip_names.h: one test per alias (each product to its chip, as
// people write it), chip names themselves, and names that map to nothing.

#include "client/commands/chip_names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

// What `flopscope counters --list-chips` printed with CUDA 13.0's CUPTI.
const std::vector<std::string>& Chips() {
  static const auto* chips = new std::vector<std::string>{
      "GV100", "TU102", "GA100", "GA102", "GA10B", "GH100", "AD102", "AD103",
      "AD104", "GB100", "GB102", "GB110", "GB202", "GB203", "GB20B"};
  return *chips;
}

std::string Chip(const char* name) { return ChipForName(name, Chips()); }

TEST(ChipNamesTest, H100) { EXPECT_EQ(Chip("H100"), "GH100"); }
TEST(ChipNamesTest, H200) { EXPECT_EQ(Chip("H200"), "GH100"); }
TEST(ChipNamesTest, GH200) { EXPECT_EQ(Chip("GH200"), "GH100"); }
TEST(ChipNamesTest, H20) { EXPECT_EQ(Chip("H20"), "GH100"); }
TEST(ChipNamesTest, A100) { EXPECT_EQ(Chip("A100"), "GA100"); }
TEST(ChipNamesTest, A30) { EXPECT_EQ(Chip("A30"), "GA100"); }
TEST(ChipNamesTest, A40) { EXPECT_EQ(Chip("A40"), "GA102"); }
TEST(ChipNamesTest, A10) { EXPECT_EQ(Chip("A10"), "GA102"); }
TEST(ChipNamesTest, Rtx3090) { EXPECT_EQ(Chip("RTX 3090"), "GA102"); }
TEST(ChipNamesTest, RtxA6000) { EXPECT_EQ(Chip("RTX A6000"), "GA102"); }
TEST(ChipNamesTest, B200) { EXPECT_EQ(Chip("B200"), "GB100"); }
TEST(ChipNamesTest, GB200) { EXPECT_EQ(Chip("GB200"), "GB100"); }
TEST(ChipNamesTest, RtxPro6000) { EXPECT_EQ(Chip("RTX PRO 6000"), "GB202"); }
TEST(ChipNamesTest, RtxPro5000) { EXPECT_EQ(Chip("RTX PRO 5000"), "GB202"); }
TEST(ChipNamesTest, RtxPro4500) { EXPECT_EQ(Chip("RTX PRO 4500"), "GB203"); }
TEST(ChipNamesTest, L40S) { EXPECT_EQ(Chip("L40S"), "AD102"); }
TEST(ChipNamesTest, L40) { EXPECT_EQ(Chip("L40"), "AD102"); }
TEST(ChipNamesTest, Rtx4090) { EXPECT_EQ(Chip("RTX 4090"), "AD102"); }
TEST(ChipNamesTest, Rtx6000Ada) { EXPECT_EQ(Chip("RTX 6000 Ada"), "AD102"); }
TEST(ChipNamesTest, L4) { EXPECT_EQ(Chip("L4"), "AD104"); }

TEST(ChipNamesTest, EveryAliasIsTestedAboveAndNamesAListedChip) {
  EXPECT_EQ(ChipAliases().size(), 20u);  // a new row needs its own test above
  for (const ChipAlias& alias : ChipAliases()) {
    EXPECT_EQ(ChipForName(alias.product, Chips()), alias.chip) << alias.product;
  }
}

TEST(ChipNamesTest, CaseSpacesDashesAndBrandWordsAreIgnored) {
  EXPECT_EQ(Chip("h100"), "GH100");
  EXPECT_EQ(Chip("4090"), "AD102");
  EXPECT_EQ(Chip("rtx-4090"), "AD102");
  EXPECT_EQ(Chip("GeForce RTX 4090"), "AD102");
  EXPECT_EQ(Chip("NVIDIA H200"), "GH100");
  EXPECT_EQ(Chip("Tesla A100"), "GA100");
  EXPECT_EQ(Chip("l40s"), "AD102");
  EXPECT_EQ(Chip("rtx_pro_6000"), "GB202");
}

TEST(ChipNamesTest, ChipNamesThemselvesAreKeptInCupTisSpelling) {
  EXPECT_EQ(Chip("GH100"), "GH100");
  EXPECT_EQ(Chip("gh100"), "GH100");
  EXPECT_EQ(Chip("ga10b"), "GA10B");
  EXPECT_EQ(Chip("gb-202"), "GB202");
}

TEST(ChipNamesTest, NamesThatMapToNothingGiveNothing) {
  EXPECT_EQ(Chip(""), "");
  EXPECT_EQ(Chip("H1000"), "");
  EXPECT_EQ(Chip("A1"), "");
  EXPECT_EQ(Chip("NVIDIA"), "");
  EXPECT_EQ(Chip("B300"), "");  // no public NVIDIA document we checked names its chip
}

TEST(ChipNamesTest, TheListNamesEveryProductByChip) {
  const std::string list = ChipAliasList();
  EXPECT_NE(list.find("H100, H200, GH200, H20 -> GH100"), std::string::npos) << list;
  EXPECT_NE(list.find("B200, GB200 -> GB100"), std::string::npos) << list;
  EXPECT_NE(list.find("L40S, L40, RTX 4090, RTX 6000 Ada -> AD102"), std::string::npos) << list;
}

}  // namespace
}  // namespace flopscope::client
