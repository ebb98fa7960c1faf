#pragma once

// A mergeable summary of durations: the building block of the rollups kept at ingest (issue 33,
// docs/design/rollups.md), which let a report read one summary per rank, module and window of
// steps instead of every range event.
//
// Count, sum, min and max are always exact. The samples themselves are kept while there are at
// most kMaxExactSamples of them, so the median of a small job is the median the report has always
// printed (MedianOf: the mean of the middle two for an even count, rounded down). Past that the
// sketch switches, once and for good, to counts per logarithmic bucket (the DDSketch idea:
// bucket k holds (gamma^(k-1), gamma^k] with gamma = (1 + a) / (1 - a)), and the value it gives
// for any rank is within a = kRelativeAccuracy of the true sample's value (plus half a
// nanosecond of rounding), whatever the number of samples or the order they were merged in.
//
// Durations below 0 (a clock stepped back) count as 0. Not thread-safe: one owner at a time.

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "flopscope/v1/rollups.pb.h"

namespace flopscope::daemon {

// The median of `samples` as the report defines it: the middle one, or the mean of the middle two
// for an even count, rounded down (0 for none). Reorders `samples`.
int64_t MedianOf(std::vector<int64_t>* samples);

class LatencySketch {
 public:
  // Samples kept as they are: a rank's window of 100 steps always, a whole job's module up to
  // about 20 ranks of it (so the report tests' medians are exact).
  static constexpr size_t kMaxExactSamples = 2048;
  // The bucketed form's bound on the relative error of any rank's value.
  static constexpr double kRelativeAccuracy = 0.01;
  // The highest bucket a positive int64 falls in (gamma^2183 > 2^63), which bounds a stored
  // sketch's bucket list.
  static constexpr int32_t kMaxBucket = 2200;

  void Add(int64_t duration_ns);
  void Merge(const LatencySketch& other);

  uint64_t count() const { return count_; }
  int64_t sum_ns() const { return sum_ns_; }
  int64_t min_ns() const { return count_ == 0 ? 0 : min_ns_; }
  int64_t max_ns() const { return count_ == 0 ? 0 : max_ns_; }
  // True while the samples themselves are kept (every figure exact).
  bool exact() const { return !bucketed_; }

  // The k-th smallest sample (0-based; k < count()), within kRelativeAccuracy of it once bucketed.
  int64_t ValueAtRank(uint64_t k) const;
  // MedianOf the samples (0 for none), from ValueAtRank once bucketed.
  int64_t Median() const;

  void ToProto(v1::LatencySketch* out) const;
  // Refuses what no sketch writes: counts that do not add up, samples out of order, buckets out of
  // range, min above max. The bytes come from a rank file or the network.
  static absl::StatusOr<LatencySketch> FromProto(const v1::LatencySketch& in);

 private:
  static int32_t BucketOf(int64_t duration_ns);  // duration_ns >= 1
  // The value a bucket stands for: the point within kRelativeAccuracy of both its ends.
  static int64_t ValueOfBucket(int32_t bucket);
  void Bucketize();  // from the exact form, for good
  void AddToBuckets(int64_t duration_ns, uint64_t n);
  void Note(int64_t duration_ns);  // count, sum, min, max

  uint64_t count_ = 0;
  int64_t sum_ns_ = 0;
  int64_t min_ns_ = 0;
  int64_t max_ns_ = 0;
  bool bucketed_ = false;
  std::vector<int64_t> exact_;  // unordered, while !bucketed_
  uint64_t zero_count_ = 0;     // samples of 0 ns, once bucketed_
  std::map<int32_t, uint64_t> buckets_;
};

}  // namespace flopscope::daemon
