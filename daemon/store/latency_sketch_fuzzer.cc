// Fuzzes the stored form of latency sketches (latency_sketch.h): the bytes come from a rank file,
// which may be damaged or edited by hand, or from the network, and FromProto must refuse what no
// sketch writes without crashing, reading out of bounds or tripping UBSan. What it accepts must
// answer every rank within [min, max], and survive a round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "daemon/store/latency_sketch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flopscope::daemon::LatencySketch;
  flopscope::v1::LatencySketch stored;
  if (!stored.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<LatencySketch> sketch = LatencySketch::FromProto(stored);
  if (!sketch.ok()) return 0;
  const uint64_t count = sketch->count();
  for (uint64_t k : {uint64_t{0}, count / 2, count == 0 ? 0 : count - 1}) {
    const int64_t value = sketch->ValueAtRank(k);
    if (count > 0 && (value < sketch->min_ns() || value > sketch->max_ns())) abort();
  }
  const int64_t median = sketch->Median();
  if (count > 0 && (median < sketch->min_ns() || median > sketch->max_ns())) abort();
  flopscope::v1::LatencySketch again;
  sketch->ToProto(&again);
  absl::StatusOr<LatencySketch> back = LatencySketch::FromProto(again);
  if (!back.ok() || back->count() != count || back->Median() != median) abort();
  LatencySketch merged = *sketch;
  merged.Merge(*back);
  if (merged.count() != 2 * count && count <= UINT64_MAX / 2) abort();
  return 0;
}
