// WindowEstimates: the estimate of a step window is the median per step of the figures in effect.
#include "daemon/report/estimate_window.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

v1::Metadata Mark(const std::string& key, double value, int64_t time_ns) {
  v1::Metadata entry;
  entry.set_key(key);
  entry.set_value(absl::StrCat(value));
  entry.set_time_ns(time_ns);
  return entry;
}

double ValueOf(const std::vector<v1::Metadata>& metadata, const std::string& key) {
  int found = 0;
  double value = -1;
  for (const v1::Metadata& entry : metadata) {
    if (entry.key() != key) continue;
    ++found;
    EXPECT_TRUE(absl::SimpleAtod(entry.value(), &value)) << entry.value();
  }
  EXPECT_EQ(found, 1) << key;
  return value;
}

TEST(WindowEstimatesTest, TheMedianOfTheFiguresInEffectInTheWindowsSteps) {
  // Steps end at 100, 200, ..., 500. The figure changes in step 0 (a), 2 (b) and after the window.
  const std::vector<int64_t> all_ends = {100, 200, 300, 400, 500};
  const double a = 1000, b = 3000, later = 9000;
  const std::string key = "estimated_flops Net/fc";
  std::vector<v1::Metadata> marks = {Mark("class Net/fc", 0, 5), Mark(key, a, 90),
                                     Mark(key, b, 290), Mark(key, later, 590)};
  marks[0].set_value("Linear");
  // Window 1..4: a in step 1, b in steps 2, 3, 4: median b (the last mark, 9000, is after it).
  std::vector<v1::Metadata> window = marks;
  WindowEstimates({all_ends.begin() + 1, all_ends.end()}, &window);
  EXPECT_EQ(ValueOf(window, key), b);
  EXPECT_EQ(window.front().key(), "class Net/fc");  // other marks kept, in order
  EXPECT_EQ(window.back().time_ns(), all_ends.back());
  // Window 0..1: a, a.  Window 1..2: a, b: their mean, as medians of even counts are.
  window = marks;
  WindowEstimates({all_ends[0], all_ends[1]}, &window);
  EXPECT_EQ(ValueOf(window, key), a);
  window = marks;
  WindowEstimates({all_ends[1], all_ends[2]}, &window);
  EXPECT_EQ(ValueOf(window, key), (a + b) / 2);
}

TEST(WindowEstimatesTest, StepsBeforeTheFirstFigureAndUnmarkedRunsAreLeftAlone) {
  const std::string key = "estimated_macs Net";
  const double figure = 12345678901;  // more digits than StrCat(double) keeps
  std::vector<v1::Metadata> marks = {Mark(key, 0, 0)};
  marks[0].set_value("12345678901");
  marks[0].set_time_ns(250);
  std::vector<v1::Metadata> window = marks;
  WindowEstimates({100, 200, 300}, &window);  // only step 2 has a figure
  EXPECT_EQ(ValueOf(window, key), figure);
  EXPECT_EQ(window[0].value(), "12345678901");
  window = marks;
  WindowEstimates({100, 200}, &window);  // none in the window: no figure at all
  EXPECT_TRUE(window.empty());
  window = marks;
  WindowEstimates({}, &window);  // no step marked: as announced
  ASSERT_EQ(window.size(), 1u);
  EXPECT_EQ(window[0].time_ns(), 250);
}

}  // namespace
}  // namespace flopscope::daemon
