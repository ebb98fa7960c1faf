#include "daemon/validate/parallel_mark.h"

#include <gtest/gtest.h>

namespace flopscope::daemon {
namespace {

TEST(ParallelMarkTest, ReadsEveryFieldInAnyOrder) {
  absl::StatusOr<v1::ParallelLayout> layout =
      ParseParallelMark("dp_rank=1 tp=2  pp=2 dp=2 tp_rank=1 pp_rank=0 vp=4");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->tp_size(), 2u);
  EXPECT_EQ(layout->pp_size(), 2u);
  EXPECT_EQ(layout->dp_size(), 2u);
  EXPECT_EQ(layout->tp_rank(), 1u);
  EXPECT_EQ(layout->pp_rank(), 0u);
  EXPECT_EQ(layout->dp_rank(), 1u);
  EXPECT_EQ(layout->source(), "nvtx");
}

TEST(ParallelMarkTest, MissingFieldsMeanOneGroupOfOne) {
  absl::StatusOr<v1::ParallelLayout> layout = ParseParallelMark("dp=8 dp_rank=5");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->tp_size(), 1u);
  EXPECT_EQ(layout->pp_size(), 1u);
  EXPECT_EQ(layout->dp_size(), 8u);
  EXPECT_EQ(layout->dp_rank(), 5u);
}

TEST(ParallelMarkTest, RejectsNonsense) {
  for (const char* bad : {"tp=two", "tp=0", "tp=2 tp_rank=2", "dp=4 dp_rank=-1", "pp=99999999"}) {
    absl::StatusOr<v1::ParallelLayout> layout = ParseParallelMark(bad);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(layout.status().message().find("parallel mark"), absl::string_view::npos) << bad;
  }
}

}  // namespace
}  // namespace flopscope::daemon
