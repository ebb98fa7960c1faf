// What `flopscope export` says after writing: every chunk counted once, an unreadable rank named,
// and steps that folding packed said to be left out (not a silently empty timeline).
#include "client/trace_export/export_command.h"

#include <gtest/gtest.h>

#include <sstream>

namespace flopscope::client {
namespace {

v1::TraceChunk Chunk(int32_t rank, int ranges, uint64_t folded) {
  v1::TraceChunk chunk;
  chunk.set_rank(rank);
  chunk.mutable_session()->set_session_id("s");
  for (int i = 0; i < ranges; ++i) chunk.add_ranges()->set_flows(1);
  chunk.set_folded_range_events(folded);
  return chunk;
}

TEST(ExportSummaryTest, FoldedStepsAreSaidToBeLeftOut) {
  ExportSummary summary;
  AddToSummary(Chunk(0, 2, 40), summary);
  AddToSummary(Chunk(1, 3, 60), summary);
  AddToSummary(Chunk(2, 1, 0), summary);
  EXPECT_EQ(summary.ranges, 6u);
  EXPECT_EQ(summary.flows, 6u);
  EXPECT_EQ(summary.sessions, 3u);
  EXPECT_EQ(summary.folded_range_events, 100u);
  EXPECT_EQ(summary.folded_ranks, 2u);
  std::ostringstream out;
  ExportOptions options;
  options.output = "t.pftrace";
  PrintSummary(summary, options, out);
  EXPECT_NE(out.str().find("left out 100 range events of 2 rank(s)"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("--keep-raw-steps"), std::string::npos);
  EXPECT_NE(out.str().find("wrote 6 ranges"), std::string::npos);
}

TEST(ExportSummaryTest, NothingFoldedSaysNothingAboutFolding) {
  ExportSummary summary;
  AddToSummary(Chunk(0, 1, 0), summary);
  v1::TraceChunk bad;
  bad.set_rank(3);
  bad.set_problem("file is damaged");
  AddToSummary(bad, summary);
  std::ostringstream out;
  PrintSummary(summary, ExportOptions{}, out);
  EXPECT_EQ(out.str().find("folded"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("left out rank 3: file is damaged"), std::string::npos) << out.str();
}

TEST(ExportSummaryTest, AFileLeftAloneIsNamedOnceForItsRank) {
  ExportSummary summary;
  v1::TraceChunk first = Chunk(1, 2, 0);
  first.set_left_alone("/d/rank-00001.sqlite is a directory: read beside it");
  AddToSummary(first, summary);
  AddToSummary(Chunk(1, 3, 0), summary);  // the rank's later chunks carry no note
  std::ostringstream out;
  PrintSummary(summary, ExportOptions{}, out);
  EXPECT_NE(out.str().find("rank 1: /d/rank-00001.sqlite is a directory: read beside it\n"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(summary.left_alone.size(), 1u);
  EXPECT_NE(out.str().find("wrote 5 ranges"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace flopscope::client
