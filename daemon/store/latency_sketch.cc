// Mergeable duration summaries (latency_sketch.h): exact samples, then logarithmic buckets.
#include "daemon/store/latency_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

constexpr double kGamma =
    (1 + LatencySketch::kRelativeAccuracy) / (1 - LatencySketch::kRelativeAccuracy);
const double kLogGamma = std::log(kGamma);

// a + b for durations, held at the int64 bounds: a sum of untrusted sketches must not overflow.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

// The mean of two durations, rounded down, without overflowing their sum.
int64_t MeanOf(int64_t a, int64_t b) { return a / 2 + b / 2 + (a % 2 + b % 2) / 2; }

}  // namespace

int64_t MedianOf(std::vector<int64_t>* samples) {
  if (samples->empty()) return 0;
  const size_t middle = samples->size() / 2;
  std::nth_element(samples->begin(), samples->begin() + middle, samples->end());
  if (samples->size() % 2 != 0) return (*samples)[middle];
  const int64_t lower = *std::max_element(samples->begin(), samples->begin() + middle);
  return MeanOf(lower, (*samples)[middle]);
}

void LatencySketch::Note(int64_t duration_ns) {
  if (count_ == 0 || duration_ns < min_ns_) min_ns_ = duration_ns;
  if (count_ == 0 || duration_ns > max_ns_) max_ns_ = duration_ns;
  ++count_;
  sum_ns_ = SaturatingAdd(sum_ns_, duration_ns);
}

void LatencySketch::Add(int64_t duration_ns) {
  duration_ns = std::max<int64_t>(duration_ns, 0);
  Note(duration_ns);
  if (bucketed_) {
    AddToBuckets(duration_ns, 1);
    return;
  }
  exact_.push_back(duration_ns);
  if (exact_.size() > kMaxExactSamples) Bucketize();
}

void LatencySketch::Merge(const LatencySketch& other) {
  if (other.count_ == 0) return;
  if (count_ == 0 || other.min_ns_ < min_ns_) min_ns_ = other.min_ns_;
  if (count_ == 0 || other.max_ns_ > max_ns_) max_ns_ = other.max_ns_;
  count_ += other.count_;
  sum_ns_ = SaturatingAdd(sum_ns_, other.sum_ns_);
  if (!bucketed_ && !other.bucketed_ && exact_.size() + other.exact_.size() <= kMaxExactSamples) {
    exact_.insert(exact_.end(), other.exact_.begin(), other.exact_.end());
    return;
  }
  Bucketize();
  for (int64_t sample : other.exact_) AddToBuckets(sample, 1);
  zero_count_ += other.zero_count_;
  for (const auto& [bucket, n] : other.buckets_) buckets_[bucket] += n;
}

int32_t LatencySketch::BucketOf(int64_t duration_ns) {
  const double bucket = std::ceil(std::log(static_cast<double>(duration_ns)) / kLogGamma);
  return std::clamp(static_cast<int32_t>(bucket), 0, kMaxBucket);
}

int64_t LatencySketch::ValueOfBucket(int32_t bucket) {
  const double value = 2 * std::pow(kGamma, bucket) / (kGamma + 1);
  if (value >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return std::numeric_limits<int64_t>::max();
  }
  return std::llround(value);
}

void LatencySketch::AddToBuckets(int64_t duration_ns, uint64_t n) {
  if (duration_ns == 0) {
    zero_count_ += n;
  } else {
    buckets_[BucketOf(duration_ns)] += n;
  }
}

void LatencySketch::Bucketize() {
  if (bucketed_) return;
  bucketed_ = true;
  for (int64_t sample : exact_) AddToBuckets(sample, 1);
  exact_.clear();
  exact_.shrink_to_fit();
}

int64_t LatencySketch::ValueAtRank(uint64_t k) const {
  if (count_ == 0) return 0;
  k = std::min(k, count_ - 1);
  if (!bucketed_) {
    std::vector<int64_t> samples = exact_;
    std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(k), samples.end());
    return samples[k];
  }
  if (k < zero_count_) return min_ns_;  // 0: FromProto refuses samples of 0 ns above a min
  uint64_t seen = zero_count_;
  for (const auto& [bucket, n] : buckets_) {
    seen += n;
    if (k < seen) return std::clamp(ValueOfBucket(bucket), min_ns_, max_ns_);
  }
  return max_ns_;  // unreachable while the counts add up (FromProto checks that they do)
}

int64_t LatencySketch::Median() const {
  if (!bucketed_) {
    std::vector<int64_t> samples = exact_;
    return MedianOf(&samples);
  }
  const uint64_t middle = count_ / 2;
  if (count_ % 2 != 0) return ValueAtRank(middle);
  return MeanOf(ValueAtRank(middle - 1), ValueAtRank(middle));
}

void LatencySketch::ToProto(v1::LatencySketch* out) const {
  out->Clear();
  out->set_count(count_);
  out->set_sum_ns(sum_ns_);
  out->set_min_ns(min_ns());
  out->set_max_ns(max_ns());
  out->set_bucketed(bucketed_);
  if (!bucketed_) {
    std::vector<int64_t> sorted = exact_;
    std::sort(sorted.begin(), sorted.end());
    int64_t previous = 0;
    for (int64_t sample : sorted) {
      out->add_exact_deltas_ns(static_cast<uint64_t>(sample - previous));
      previous = sample;
    }
    return;
  }
  out->set_zero_count(zero_count_);
  if (buckets_.empty()) return;
  const int32_t first = buckets_.begin()->first;
  out->set_first_bucket(first);
  for (const auto& [bucket, n] : buckets_) {
    while (first + out->bucket_counts_size() < bucket) out->add_bucket_counts(0);
    out->add_bucket_counts(n);
  }
}

absl::StatusOr<LatencySketch> LatencySketch::FromProto(const v1::LatencySketch& in) {
  LatencySketch sketch;
  if (in.count() == 0) {
    if (in.exact_deltas_ns_size() != 0 || in.bucket_counts_size() != 0 || in.zero_count() != 0) {
      return absl::InvalidArgumentError("an empty latency sketch with samples");
    }
    return sketch;
  }
  if (in.min_ns() < 0 || in.min_ns() > in.max_ns()) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency sketch min ", in.min_ns(), " and max ", in.max_ns()));
  }
  sketch.count_ = in.count();
  sketch.sum_ns_ = in.sum_ns();
  sketch.min_ns_ = in.min_ns();
  sketch.max_ns_ = in.max_ns();
  if (!in.bucketed()) {
    if (in.count() > kMaxExactSamples ||
        in.exact_deltas_ns_size() != static_cast<int>(in.count()) || in.bucket_counts_size() != 0 ||
        in.zero_count() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("an exact latency sketch of ", in.count(),
                                                     " samples holds ", in.exact_deltas_ns_size()));
    }
    int64_t value = 0;
    for (uint64_t delta : in.exact_deltas_ns()) {
      if (delta > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_add_overflow(value, static_cast<int64_t>(delta), &value)) {
        return absl::InvalidArgumentError("latency sketch samples beyond int64");
      }
      sketch.exact_.push_back(value);
    }
    if (sketch.exact_.front() != in.min_ns() || sketch.exact_.back() != in.max_ns()) {
      return absl::InvalidArgumentError("latency sketch samples outside its min and max");
    }
    return sketch;
  }
  if (in.zero_count() > 0 && in.min_ns() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a latency sketch with ", in.zero_count(),
                                                   " samples of 0 ns and min ", in.min_ns()));
  }
  if (in.exact_deltas_ns_size() != 0 || in.first_bucket() < 0 ||
      in.bucket_counts_size() > kMaxBucket + 1 - in.first_bucket()) {
    return absl::InvalidArgumentError(absl::StrCat("latency sketch buckets ", in.first_bucket(),
                                                   " + ", in.bucket_counts_size(),
                                                   " beyond bucket ", kMaxBucket));
  }
  sketch.bucketed_ = true;
  sketch.zero_count_ = in.zero_count();
  uint64_t total = in.zero_count();
  for (int i = 0; i < in.bucket_counts_size(); ++i) {
    const uint64_t n = in.bucket_counts(i);
    if (n == 0) continue;
    if (__builtin_add_overflow(total, n, &total)) {
      return absl::InvalidArgumentError("latency sketch bucket counts beyond uint64");
    }
    sketch.buckets_[in.first_bucket() + i] = n;
  }
  if (total != in.count()) {
    return absl::InvalidArgumentError(absl::StrCat("latency sketch buckets hold ", total,
                                                   " samples, its count says ", in.count()));
  }
  return sketch;
}

}  // namespace flopscope::daemon
