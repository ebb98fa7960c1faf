// LatencySketch: exact while small (the report's medians unchanged), within its stated relative
// error once bucketed, the same whatever the merge order, and refusing stored forms no sketch
// writes.
#include "daemon/store/latency_sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace flopscope::daemon {
namespace {

// Durations spread over three orders of magnitude, as module latencies are.
std::vector<int64_t> LogNormalSamples(size_t n, uint32_t seed) {
  std::mt19937_64 random(seed);
  std::lognormal_distribution<double> distribution(std::log(200000.0), 1.2);
  std::vector<int64_t> samples(n);
  for (int64_t& sample : samples) sample = std::llround(distribution(random));
  return samples;
}

LatencySketch SketchOf(const std::vector<int64_t>& samples) {
  LatencySketch sketch;
  for (int64_t sample : samples) sketch.Add(sample);
  return sketch;
}

LatencySketch RoundTrip(const LatencySketch& sketch) {
  v1::LatencySketch stored;
  sketch.ToProto(&stored);
  v1::LatencySketch parsed;
  EXPECT_TRUE(parsed.ParseFromString(stored.SerializeAsString()));
  absl::StatusOr<LatencySketch> back = LatencySketch::FromProto(parsed);
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : LatencySketch();
}

// Within the stated bound of the true value (half a nanosecond of rounding besides).
void ExpectWithinBound(int64_t estimate, int64_t truth) {
  EXPECT_LE(std::abs(static_cast<double>(estimate - truth)),
            LatencySketch::kRelativeAccuracy * static_cast<double>(truth) + 1)
      << estimate << " for " << truth;
}

TEST(LatencySketchTest, MedianOfIsTheMiddleOrTheMeanOfTheMiddleTwoRoundedDown) {
  std::vector<int64_t> odd = {100, 110, 90, 95, 400};
  EXPECT_EQ(MedianOf(&odd), 100);
  std::vector<int64_t> even = {4, 1, 3, 2};
  EXPECT_EQ(MedianOf(&even), 2);  // (2 + 3) / 2 rounded down
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> huge = {big, big - 2};
  EXPECT_EQ(MedianOf(&huge), big - 1);  // no overflow of the sum
  std::vector<int64_t> none;
  EXPECT_EQ(MedianOf(&none), 0);
}

TEST(LatencySketchTest, WhileSmallEveryFigureIsExact) {
  const std::vector<int64_t> samples = LogNormalSamples(LatencySketch::kMaxExactSamples, 1);
  const LatencySketch sketch = SketchOf(samples);
  ASSERT_TRUE(sketch.exact());
  std::vector<int64_t> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> copy = samples;
  EXPECT_EQ(sketch.Median(), MedianOf(&copy));
  EXPECT_EQ(sketch.count(), samples.size());
  EXPECT_EQ(sketch.min_ns(), sorted.front());
  EXPECT_EQ(sketch.max_ns(), sorted.back());
  int64_t sum = 0;
  for (int64_t sample : samples) sum += sample;
  EXPECT_EQ(sketch.sum_ns(), sum);
  for (uint64_t k : {uint64_t{0}, uint64_t{17}, uint64_t{1000}, uint64_t{2047}}) {
    EXPECT_EQ(sketch.ValueAtRank(k), sorted[k]) << k;
  }
}

TEST(LatencySketchTest, OnceBucketedEveryRankIsWithinTheRelativeBound) {
  const std::vector<int64_t> samples = LogNormalSamples(50000, 2);
  const LatencySketch sketch = SketchOf(samples);
  ASSERT_FALSE(sketch.exact());
  std::vector<int64_t> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t k = 0; k < sorted.size(); k += 997)
    ExpectWithinBound(sketch.ValueAtRank(k), sorted[k]);
  std::vector<int64_t> copy = samples;
  ExpectWithinBound(sketch.Median(), MedianOf(&copy));
  EXPECT_EQ(sketch.min_ns(), sorted.front());  // exact always
  EXPECT_EQ(sketch.max_ns(), sorted.back());
  EXPECT_EQ(sketch.count(), sorted.size());
}

TEST(LatencySketchTest, MergingSmallSketchesStaysExactAndEqualsOneSketchOfAll) {
  // 20 ranks of a 100-step window: 2000 samples, still exact after the merge.
  LatencySketch merged;
  std::vector<int64_t> all;
  for (uint32_t rank = 0; rank < 20; ++rank) {
    const std::vector<int64_t> window = LogNormalSamples(100, 10 + rank);
    merged.Merge(RoundTrip(SketchOf(window)));
    all.insert(all.end(), window.begin(), window.end());
  }
  ASSERT_TRUE(merged.exact());
  EXPECT_EQ(merged.Median(), MedianOf(&all));
}

TEST(LatencySketchTest, MergeOrderDoesNotChangeABucketedSketch) {
  std::vector<LatencySketch> parts;
  for (uint32_t i = 0; i < 8; ++i) parts.push_back(SketchOf(LogNormalSamples(700, 30 + i)));
  LatencySketch forward;
  for (const LatencySketch& part : parts) forward.Merge(part);
  LatencySketch backward;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) backward.Merge(*it);
  // Pairwise, as an aggregator merging node rollups would.
  LatencySketch left = parts[0], right = parts[4];
  for (int i = 1; i < 4; ++i) left.Merge(parts[i]);
  for (int i = 5; i < 8; ++i) right.Merge(parts[i]);
  left.Merge(right);
  ASSERT_FALSE(forward.exact());
  for (uint64_t k = 0; k < forward.count(); k += 101) {
    EXPECT_EQ(forward.ValueAtRank(k), backward.ValueAtRank(k)) << k;
    EXPECT_EQ(forward.ValueAtRank(k), left.ValueAtRank(k)) << k;
  }
  EXPECT_EQ(forward.sum_ns(), left.sum_ns());
}

TEST(LatencySketchTest, TheStoredFormRoundTripsInBothForms) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{300}, size_t{9000}}) {
    std::vector<int64_t> samples = LogNormalSamples(n, 50);
    if (n > 1) samples[1] = 0;  // zero-length ranges happen
    const LatencySketch sketch = SketchOf(samples);
    const LatencySketch back = RoundTrip(sketch);
    EXPECT_EQ(back.exact(), sketch.exact()) << n;
    EXPECT_EQ(back.count(), sketch.count()) << n;
    EXPECT_EQ(back.sum_ns(), sketch.sum_ns()) << n;
    EXPECT_EQ(back.min_ns(), sketch.min_ns()) << n;
    EXPECT_EQ(back.max_ns(), sketch.max_ns()) << n;
    for (uint64_t k = 0; k < n; k += 37) EXPECT_EQ(back.ValueAtRank(k), sketch.ValueAtRank(k));
  }
}

TEST(LatencySketchTest, AStoredWindowOfAHundredStepsIsSmall) {
  // What one module of one rank costs per window on disk and on the wire (issue 33: <= 1 KB per
  // rank and step for all modules together).
  v1::LatencySketch stored;
  SketchOf(LogNormalSamples(100, 60)).ToProto(&stored);
  EXPECT_LT(stored.ByteSizeLong(), 400u);
}

TEST(LatencySketchTest, NegativeDurationsCountAsZero) {
  LatencySketch sketch;
  sketch.Add(-5);
  sketch.Add(10);
  EXPECT_EQ(sketch.min_ns(), 0);
  EXPECT_EQ(sketch.sum_ns(), 10);
}

TEST(LatencySketchTest, StoredFormsNoSketchWritesAreRefused) {
  v1::LatencySketch good;
  SketchOf({5, 7, 9}).ToProto(&good);
  ASSERT_TRUE(LatencySketch::FromProto(good).ok());

  v1::LatencySketch wrong_count = good;
  wrong_count.set_count(4);
  EXPECT_FALSE(LatencySketch::FromProto(wrong_count).ok());

  v1::LatencySketch outside = good;
  outside.set_max_ns(8);  // the samples end at 9
  EXPECT_FALSE(LatencySketch::FromProto(outside).ok());

  v1::LatencySketch inverted = good;
  inverted.set_min_ns(10);
  EXPECT_FALSE(LatencySketch::FromProto(inverted).ok());

  v1::LatencySketch overflow = good;
  overflow.set_exact_deltas_ns(1, ~uint64_t{0});
  EXPECT_FALSE(LatencySketch::FromProto(overflow).ok());

  v1::LatencySketch too_many;
  too_many.set_count(LatencySketch::kMaxExactSamples + 1);
  too_many.set_max_ns(1);
  for (size_t i = 0; i <= LatencySketch::kMaxExactSamples; ++i) too_many.add_exact_deltas_ns(0);
  EXPECT_FALSE(LatencySketch::FromProto(too_many).ok());

  v1::LatencySketch bucketed;
  SketchOf(LogNormalSamples(5000, 70)).ToProto(&bucketed);
  ASSERT_TRUE(LatencySketch::FromProto(bucketed).ok());
  v1::LatencySketch beyond = bucketed;
  beyond.set_first_bucket(LatencySketch::kMaxBucket);
  EXPECT_FALSE(LatencySketch::FromProto(beyond).ok());
  v1::LatencySketch negative = bucketed;
  negative.set_first_bucket(-1);
  EXPECT_FALSE(LatencySketch::FromProto(negative).ok());
  v1::LatencySketch short_counts = bucketed;
  short_counts.set_zero_count(short_counts.zero_count() + 1);
  EXPECT_FALSE(LatencySketch::FromProto(short_counts).ok());
  // Found by latency_sketch_fuzzer: samples of 0 ns in a sketch whose min is above 0 (its median
  // would have been 0, below the min).
  v1::LatencySketch zeros_above_min = bucketed;
  zeros_above_min.set_zero_count(1);
  zeros_above_min.set_min_ns(618);
  zeros_above_min.set_count(zeros_above_min.count() + 1 - bucketed.zero_count());
  EXPECT_FALSE(LatencySketch::FromProto(zeros_above_min).ok());
  v1::LatencySketch wrapping = bucketed;
  wrapping.set_bucket_counts(0, ~uint64_t{0});
  EXPECT_FALSE(LatencySketch::FromProto(wrapping).ok());
}

}  // namespace
}  // namespace flopscope::daemon
