#include "importer/progress_bar.h"

#include <gtest/gtest.h>

#include <sstream>

namespace flopscope::importer {
namespace {

TEST(ProgressBarTest, RendersFractionAndRate) {
  EXPECT_EQ(ProgressBar::Render("trace.json.gz", 50'000'000, 100'000'000, absl::Seconds(2)),
            "trace.json.gz  [##########..........]   50%  25.0 MB/s");
  EXPECT_EQ(ProgressBar::Render("t", 5, 0, absl::ZeroDuration()),
            "t  [####################]  100%  0.0 MB/s");
}

TEST(ProgressBarTest, DisabledPrintsNothing) {
  std::ostringstream out;
  {
    ProgressBar bar(out, "x", false);
    bar.Update(1, 2);
  }
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressBarTest, RedrawsAtMostTenTimesASecondAndErasesItself) {
  std::ostringstream out;
  const absl::Time start = absl::FromUnixSeconds(1000);
  {
    ProgressBar bar(out, "x", true, start);
    bar.Update(1, 4, start + absl::Milliseconds(200));
    bar.Update(2, 4, start + absl::Milliseconds(250));  // too soon: skipped
    bar.Update(3, 4, start + absl::Milliseconds(400));
  }
  const std::string text = out.str();
  EXPECT_NE(text.find(" 25%"), std::string::npos);
  EXPECT_EQ(text.find(" 50%"), std::string::npos);
  EXPECT_NE(text.find(" 75%"), std::string::npos);
  EXPECT_EQ(text.back(), '\r');
}

}  // namespace
}  // namespace flopscope::importer
