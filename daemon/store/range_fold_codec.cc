// Packs and unpacks folded range events (range_fold_codec.h): ZigZag deltas as LEB128 varints.
#include "daemon/store/range_fold_codec.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

uint64_t ZigZag(uint64_t delta) {
  const auto value = static_cast<int64_t>(delta);
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

uint64_t UnZigZag(uint64_t encoded) { return (encoded >> 1) ^ (~(encoded & 1) + 1); }

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Deltas in uint64 arithmetic: wrap-around is defined, so any pair of values round-trips.
void PutDelta(uint64_t value, uint64_t base, std::string* out) {
  PutVarint(ZigZag(value - base), out);
}

// Reads varints off the front of `data_`; the first failure sticks.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (data_.empty()) return Fail();
      const auto byte = static_cast<uint8_t>(data_.front());
      data_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Fail();  // more than ten bytes
  }
  uint64_t Delta(uint64_t base) { return base + UnZigZag(Varint()); }

  bool ok() const { return ok_; }
  bool done() const { return data_.empty(); }

 private:
  uint64_t Fail() {
    ok_ = false;
    data_ = {};
    return 0;
  }
  absl::string_view data_;
  bool ok_ = true;
};

void EncodeOne(const FoldedRange& event, const FoldedRange& previous, std::string* out) {
  const uint64_t flags = (static_cast<uint64_t>(static_cast<uint32_t>(event.kind)) << 2) |
                         (event.counted ? 2u : 0u) | (event.has_stats ? 1u : 0u);
  PutVarint(flags, out);
  PutDelta(static_cast<uint64_t>(event.sid), static_cast<uint64_t>(previous.sid), out);
  PutVarint(event.path_id, out);
  PutDelta(event.instance_id, previous.instance_id, out);
  PutDelta(event.parent_instance_id, event.instance_id, out);
  PutDelta(event.thread_id, previous.thread_id, out);
  const auto start = static_cast<uint64_t>(event.start_ns);
  PutDelta(start, static_cast<uint64_t>(previous.start_ns), out);
  PutDelta(static_cast<uint64_t>(event.end_ns), start, out);
  if (!event.has_stats) return;
  const InstanceActivity& stats = event.stats;
  PutDelta(stats.path_id, event.path_id, out);
  PutVarint(stats.kernels, out);
  const auto first = static_cast<uint64_t>(stats.first_start_ns);
  PutDelta(first, start, out);
  PutDelta(static_cast<uint64_t>(stats.last_end_ns), first, out);
  PutVarint(ZigZag(static_cast<uint64_t>(stats.busy_ns)), out);
}

bool DecodeOne(Reader& in, const FoldedRange& previous, FoldedRange* event) {
  const uint64_t flags = in.Varint();
  if ((flags >> 2) > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
  event->kind = static_cast<int32_t>(flags >> 2);
  event->counted = (flags & 2) != 0;
  event->has_stats = (flags & 1) != 0;
  event->sid = static_cast<int64_t>(in.Delta(static_cast<uint64_t>(previous.sid)));
  event->path_id = in.Varint();
  event->instance_id = in.Delta(previous.instance_id);
  event->parent_instance_id = in.Delta(event->instance_id);
  event->thread_id = in.Delta(previous.thread_id);
  const uint64_t start = in.Delta(static_cast<uint64_t>(previous.start_ns));
  event->start_ns = static_cast<int64_t>(start);
  event->end_ns = static_cast<int64_t>(in.Delta(start));
  event->stats = InstanceActivity{};
  if (event->has_stats) {
    InstanceActivity& stats = event->stats;
    stats.path_id = in.Delta(event->path_id);
    stats.kernels = in.Varint();
    const uint64_t first = in.Delta(start);
    stats.first_start_ns = static_cast<int64_t>(first);
    stats.last_end_ns = static_cast<int64_t>(in.Delta(first));
    stats.busy_ns = static_cast<int64_t>(UnZigZag(in.Varint()));
  }
  return in.ok();
}

}  // namespace

std::string EncodeRangeFold(const std::vector<FoldedRange>& events) {
  std::string out;
  out.reserve(16 + events.size() * 16);
  out.push_back(static_cast<char>(kRangeFoldFormat));
  PutVarint(events.size(), &out);
  FoldedRange previous;
  for (const FoldedRange& event : events) {
    EncodeOne(event, previous, &out);
    previous = event;
  }
  return out;
}

absl::Status DecodeRangeFold(absl::string_view data,
                             const std::function<void(const FoldedRange&)>& on_event) {
  if (data.empty() || static_cast<uint8_t>(data.front()) != kRangeFoldFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("folded range events of an unknown format (expected format ", kRangeFoldFormat,
                     "): the file was written by a newer flopscoped or damaged"));
  }
  Reader in(data.substr(1));
  const uint64_t count = in.Varint();
  if (!in.ok() || count > kMaxEventsPerFold) {
    return absl::InvalidArgumentError(
        absl::StrCat("folded range events: a bad event count (at most ", kMaxEventsPerFold, ")"));
  }
  FoldedRange previous;
  FoldedRange event;
  for (uint64_t i = 0; i < count; ++i) {
    if (!DecodeOne(in, previous, &event)) {
      return absl::InvalidArgumentError(
          absl::StrCat("folded range events: event ", i, " of ", count, " is truncated or bad"));
    }
    on_event(event);
    previous = event;
  }
  if (!in.done()) {
    return absl::InvalidArgumentError("folded range events: bytes left after the last event");
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
