#include "client/connect/step_window.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

TEST(ParseStepWindowTest, TakesARangeAnOpenEndOrOneStep) {
  absl::StatusOr<std::optional<StepWindow>> range = ParseStepWindow("10:19");
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_TRUE(range->has_value());
  EXPECT_EQ((*range)->first, 10);
  EXPECT_EQ((*range)->last, 19);

  absl::StatusOr<std::optional<StepWindow>> open = ParseStepWindow("5:");
  ASSERT_TRUE(open.ok() && open->has_value());
  EXPECT_EQ((*open)->first, 5);
  EXPECT_FALSE((*open)->last.has_value());

  absl::StatusOr<std::optional<StepWindow>> single = ParseStepWindow("7");
  ASSERT_TRUE(single.ok() && single->has_value());
  EXPECT_EQ((*single)->first, 7);
  EXPECT_EQ((*single)->last, 7);

  absl::StatusOr<std::optional<StepWindow>> to = ParseStepWindow(":3");
  ASSERT_TRUE(to.ok() && to->has_value());
  EXPECT_EQ((*to)->first, 0);
  EXPECT_EQ((*to)->last, 3);

  absl::StatusOr<std::optional<StepWindow>> whole = ParseStepWindow("");
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->has_value());
}

TEST(ParseStepWindowTest, RefusesWhatIsNotAWindowAndSaysWhy) {
  for (const char* bad : {"a:b", "3:x", ":", "1:2:3", "-1:4", "+2", "2.5", " 3", "3-4", "1e3"}) {
    absl::StatusOr<std::optional<StepWindow>> window = ParseStepWindow(bad);
    EXPECT_EQ(window.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(window.status().message(),
              std::string("--steps '") + bad +
                  "' is not a step window (use A:B, A:, :B or A; steps are numbered from 0)")
        << bad;
  }
  absl::StatusOr<std::optional<StepWindow>> backwards = ParseStepWindow("9:3");
  EXPECT_EQ(backwards.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backwards.status().message(), "--steps '9:3' ends before it starts");
}

}  // namespace
}  // namespace flopscope::client
