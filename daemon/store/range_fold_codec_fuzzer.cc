// Fuzzes the decoder of folded range events (range_fold_codec.h): the bytes come from a rank
// file, which may be damaged or edited by hand, and a report must refuse them without crashing,
// reading out of bounds or tripping UBSan. What decodes must survive a round trip: encoding the
// decoded events and decoding that again gives the same events (the input itself may spell a
// varint longer than the encoder does, so bytes are not compared).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/store/range_fold_codec.h"

namespace flopscope::daemon {
namespace {

bool Same(const FoldedRange& a, const FoldedRange& b) {
  return a.sid == b.sid && a.path_id == b.path_id && a.instance_id == b.instance_id &&
         a.parent_instance_id == b.parent_instance_id && a.thread_id == b.thread_id &&
         a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.kind == b.kind &&
         a.counted == b.counted && a.has_stats == b.has_stats &&
         a.stats.path_id == b.stats.path_id && a.stats.kernels == b.stats.kernels &&
         a.stats.first_start_ns == b.stats.first_start_ns &&
         a.stats.last_end_ns == b.stats.last_end_ns && a.stats.busy_ns == b.stats.busy_ns;
}

}  // namespace
}  // namespace flopscope::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flopscope::daemon::FoldedRange;
  std::vector<FoldedRange> events;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto keep = [&](const FoldedRange& event) { events.push_back(event); };
  if (!flopscope::daemon::DecodeRangeFold(bytes, keep).ok()) return 0;
  const std::vector<FoldedRange> first = events;
  events.clear();
  if (!flopscope::daemon::DecodeRangeFold(flopscope::daemon::EncodeRangeFold(first), keep).ok() ||
      events.size() != first.size()) {
    std::abort();
  }
  for (size_t i = 0; i < first.size(); ++i) {
    if (!flopscope::daemon::Same(first[i], events[i])) std::abort();
  }
  return 0;
}
