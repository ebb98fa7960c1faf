#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "client/trace_export/lanes.h"
#include "client/trace_export/trace_definitions.h"
#include "client/trace_export/trace_file.h"
#include "client/trace_export/trace_sink.h"
#include "perfetto/trace.pb.h"

namespace flopscope::client {

// Writes a Perfetto trace (proto/perfetto/trace.proto, Perfetto's own field numbers) one packet at
// a time, as GetTrace's chunks come:
//   - a process track per rank (pid = rank + 1: pid 0 is the kernel's in Perfetto), named
//     "rank R (host, pid P)";
//   - a thread track per CPU thread with its NVTX ranges as nested slices (ranges come in start
//     order; each track keeps a stack of its open slices and writes a slice's end once the next
//     slice starts at or after it, innermost first, so slices that touch or tie nest as they
//     did whatever order a trace processor gives equal timestamps), and under it a track
//     "steps & phases" for the `flopscope`-domain ranges (kept on a stack of their own, as the
//     injector keeps them); process-scoped start/end ranges on a track of the rank;
//   - a track per GPU stream ("GPU d stream s") with its kernels, memcpys and memsets: module,
//     grid, block, bytes and counted FLOPs by precision as debug annotations. Slices that
//     overlap on one stream or start/end track go to extra tracks beside it ("GPU d stream s
//     (overlap 1)", ...: lanes.h);
//   - a flow from each range to every activity it launched (ranges list at most
//     kMaxFlowsPerRange);
//   - counter tracks per rank: "step time" (ns, set at each step's start) and "achieved FLOPS"
//     (counted FLOPs / duration of each counted kernel while it runs, 0 after).
// Names of events and annotations are interned (one packet sequence, cleared at the start).
// Memory: the tracks, the interned names and the definitions, never the records.
class PerfettoWriter final : public TraceSink {
 public:
  explicit PerfettoWriter(TraceFile& out) : out_(out) {}

  absl::Status Add(const v1::TraceChunk& chunk) override;
  // Ends the slices still open.
  absl::Status Finish() override;

 private:
  using TrackKey = std::tuple<int32_t, int64_t, uint64_t, uint64_t>;  // rank, kind, a, b

  void AddRange(const v1::TraceChunk& chunk, const v1::TraceRange& range);
  void AddActivity(const v1::TraceChunk& chunk, const v1::TraceActivity& activity);
  void AddStepTime(int32_t rank, const v1::RangeEvent& event);
  // Writes the ends of `track`'s open slices that end at or before `time_ns`, innermost first.
  void CloseUntil(uint64_t track, uint64_t time_ns);
  void EndSlice(uint64_t track, uint64_t time_ns);
  void AddFlopsRate(int32_t rank, const v1::TraceActivity& activity);

  uint64_t ProcessTrack(const v1::TraceChunk& chunk);
  uint64_t ThreadTrack(const v1::TraceChunk& chunk, uint64_t tid);
  uint64_t PhaseTrack(const v1::TraceChunk& chunk, uint64_t tid);
  uint64_t StartEndTrack(const v1::TraceChunk& chunk, const v1::RangeEvent& event);
  uint64_t StreamTrack(const v1::TraceChunk& chunk, const v1::KernelRecord& kernel);
  uint64_t CounterTrack(int32_t rank, int kind);
  // A new track's uuid, its descriptor written with `fill` (which sets all but the uuid).
  template <typename Fill>
  uint64_t Track(const TrackKey& key, Fill fill);

  // The iid of `name`, defined in `packet` when new.
  uint64_t EventName(const std::string& name, perfetto::TracePacket& packet);
  perfetto::DebugAnnotation& Annotate(perfetto::TrackEvent& event, const std::string& name,
                                      perfetto::TracePacket& packet);
  // A packet of the trace's one sequence, ready for its payload.
  perfetto::TracePacket& NewPacket(uint64_t timestamp_ns);
  void WritePacket();

  TraceFile& out_;
  absl::Status status_;
  TraceDefinitions definitions_;
  perfetto::TracePacket packet_;
  std::string encoded_;
  bool first_packet_ = true;
  uint64_t next_uuid_ = 1;
  absl::flat_hash_map<TrackKey, uint64_t> tracks_;
  absl::flat_hash_map<std::string, uint64_t> event_names_;
  absl::flat_hash_map<std::string, uint64_t> annotation_names_;
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> open_ends_;  // track -> end times
  Lanes lanes_;
};

}  // namespace flopscope::client
