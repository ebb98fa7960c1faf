#include "injector/ranges/metadata_mark.h"

#include <gtest/gtest.h>

#include <string>

namespace flopscope::injector {
namespace {

TEST(MetadataMarkTest, ParallelKeepsTheWholeLayoutAsValue) {
  const auto entry = ParseMetadataMark("parallel tp=2 pp=1 dp=4 tp_rank=1 pp_rank=0 dp_rank=3");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "parallel");
  EXPECT_EQ(entry->value, "tp=2 pp=1 dp=4 tp_rank=1 pp_rank=0 dp_rank=3");
}

TEST(MetadataMarkTest, SplitsAtTheLastEquals) {
  auto entry = ParseMetadataMark("params Model/layer.0=1234");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "params Model/layer.0");
  EXPECT_EQ(entry->value, "1234");

  entry = ParseMetadataMark("flops Model/a=b/c=99");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "flops Model/a=b/c");
  EXPECT_EQ(entry->value, "99");
}

TEST(MetadataMarkTest, SimpleKeyValueAndEmptyValue) {
  auto entry = ParseMetadataMark(" batch_size = 32 ");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "batch_size");
  EXPECT_EQ(entry->value, "32");
  entry = ParseMetadataMark("note=");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "note");
  EXPECT_EQ(entry->value, "");
}

TEST(MetadataMarkTest, TextWithoutAKeyIsNotMetadata) {
  EXPECT_FALSE(ParseMetadataMark("checkpoint saved").has_value());
  EXPECT_FALSE(ParseMetadataMark("=5").has_value());
  EXPECT_FALSE(ParseMetadataMark("").has_value());
}

// Found by metadata_mark_fuzzer: a key the daemon refuses (longer than its 1024 bytes) made it
// reject the whole batch carrying the mark. Repairing ill-formed bytes triples their size, so
// the cut comes after the repair.
TEST(MetadataMarkTest, KeysAreCutToWhatTheDaemonAccepts) {
  const auto entry = ParseMetadataMark(std::string(600, '\xC0') + "=v");
  ASSERT_TRUE(entry.has_value());
  EXPECT_LE(entry->key.size(), kMaxMetadataKeyBytes);
  EXPECT_GT(entry->key.size(), kMaxMetadataKeyBytes - 3);  // cut at the last whole U+FFFD
  EXPECT_EQ(entry->key.size() % 3, 0u);
  EXPECT_EQ(entry->value, "v");

  const auto long_value = ParseMetadataMark("k=" + std::string(kMaxMetadataBytes + 10, 'x'));
  ASSERT_TRUE(long_value.has_value());
  EXPECT_EQ(long_value->value.size(), kMaxMetadataBytes);  // values keep the longer limit
}

TEST(MetadataMarkTest, InvalidUtf8IsRepaired) {
  const auto entry = ParseMetadataMark("k\xFF=v");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->key, "k\xEF\xBF\xBD");
}

}  // namespace
}  // namespace flopscope::injector
