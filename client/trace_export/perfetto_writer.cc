// The Perfetto protobuf export (see perfetto_writer.h).
#include "client/trace_export/perfetto_writer.h"

#include "absl/strings/str_cat.h"
#include "client/trace_export/activity_fields.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::client {
namespace {

using perfetto::TrackEvent;

constexpr uint32_t kSequenceId = 1;  // every packet of the file is on this one sequence

// TrackKey kinds.
enum TrackKind : int64_t {
  kProcess,
  kThread,
  kPhases,
  kStartEnd,
  kStream,
  kStepTime,
  kFlopsRate,
};

int32_t TracePid(int32_t rank) { return rank + 1; }

void AppendVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

}  // namespace

perfetto::TracePacket& PerfettoWriter::NewPacket(uint64_t timestamp_ns) {
  packet_.Clear();
  packet_.set_trusted_packet_sequence_id(kSequenceId);
  if (timestamp_ns != 0) packet_.set_timestamp(timestamp_ns);
  if (first_packet_) {
    packet_.set_sequence_flags(perfetto::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    first_packet_ = false;
  } else {
    packet_.set_sequence_flags(perfetto::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
  }
  return packet_;
}

void PerfettoWriter::WritePacket() {
  if (!status_.ok()) return;
  encoded_.clear();
  encoded_.push_back(0x0a);  // Trace.packet: field 1, length-delimited
  AppendVarint(packet_.ByteSizeLong(), encoded_);
  packet_.AppendToString(&encoded_);
  status_ = out_.Write(encoded_);
}

uint64_t PerfettoWriter::EventName(const std::string& name, perfetto::TracePacket& packet) {
  auto [it, added] = event_names_.try_emplace(name, event_names_.size() + 1);
  if (added) {
    perfetto::EventName& def = *packet.mutable_interned_data()->add_event_names();
    def.set_iid(it->second);
    def.set_name(name);
  }
  return it->second;
}

perfetto::DebugAnnotation& PerfettoWriter::Annotate(TrackEvent& event, const std::string& name,
                                                    perfetto::TracePacket& packet) {
  auto [it, added] = annotation_names_.try_emplace(name, annotation_names_.size() + 1);
  if (added) {
    perfetto::DebugAnnotationName& def =
        *packet.mutable_interned_data()->add_debug_annotation_names();
    def.set_iid(it->second);
    def.set_name(name);
  }
  perfetto::DebugAnnotation& annotation = *event.add_debug_annotations();
  annotation.set_name_iid(it->second);
  return annotation;
}

template <typename Fill>
uint64_t PerfettoWriter::Track(const TrackKey& key, Fill fill) {
  auto [it, added] = tracks_.try_emplace(key, 0);
  if (!added) return it->second;
  it->second = next_uuid_++;
  perfetto::TrackDescriptor& track = *NewPacket(0).mutable_track_descriptor();
  track.set_uuid(it->second);
  fill(track);
  WritePacket();
  return it->second;
}

uint64_t PerfettoWriter::ProcessTrack(const v1::TraceChunk& chunk) {
  return Track({chunk.rank(), kProcess, 0, 0}, [&](perfetto::TrackDescriptor& track) {
    perfetto::ProcessDescriptor& process = *track.mutable_process();
    process.set_pid(TracePid(chunk.rank()));
    process.set_process_name(ProcessName(chunk));
    if (!chunk.session().command().empty()) process.add_cmdline(chunk.session().command());
  });
}

uint64_t PerfettoWriter::ThreadTrack(const v1::TraceChunk& chunk, uint64_t tid) {
  const uint64_t parent = ProcessTrack(chunk);
  return Track({chunk.rank(), kThread, static_cast<uint64_t>(chunk.session_index()), tid},
               [&](perfetto::TrackDescriptor& track) {
                 track.set_parent_uuid(parent);
                 perfetto::ThreadDescriptor& thread = *track.mutable_thread();
                 thread.set_pid(TracePid(chunk.rank()));
                 thread.set_tid(static_cast<int32_t>(tid));
                 thread.set_thread_name(absl::StrCat("thread ", tid));
               });
}

uint64_t PerfettoWriter::PhaseTrack(const v1::TraceChunk& chunk, uint64_t tid) {
  const uint64_t parent = ThreadTrack(chunk, tid);
  return Track({chunk.rank(), kPhases, static_cast<uint64_t>(chunk.session_index()), tid},
               [&](perfetto::TrackDescriptor& track) {
                 track.set_parent_uuid(parent);
                 track.set_name(absl::StrCat("steps & phases (thread ", tid, ")"));
               });
}

uint64_t PerfettoWriter::StartEndTrack(const v1::TraceChunk& chunk, const v1::RangeEvent& event) {
  const uint64_t parent = ProcessTrack(chunk);
  const uint32_t lane =
      lanes_.Assign({chunk.rank(), kStartEnd, 0}, event.start_ns(), event.end_ns());
  return Track({chunk.rank(), kStartEnd, lane, 0}, [&](perfetto::TrackDescriptor& track) {
    track.set_parent_uuid(parent);
    track.set_name(LaneName("start/end ranges", lane));
  });
}

uint64_t PerfettoWriter::StreamTrack(const v1::TraceChunk& chunk, const v1::KernelRecord& kernel) {
  const uint64_t parent = ProcessTrack(chunk);
  const uint64_t stream = (uint64_t{kernel.device_id()} << 32) | kernel.stream_id();
  const uint32_t lane =
      lanes_.Assign({chunk.rank(), kStream, stream}, kernel.start_ns(), kernel.end_ns());
  return Track({chunk.rank(), kStream, stream, lane}, [&](perfetto::TrackDescriptor& track) {
    track.set_parent_uuid(parent);
    track.set_name(LaneName(StreamName(kernel), lane));
  });
}

uint64_t PerfettoWriter::CounterTrack(int32_t rank, int kind) {
  auto found = tracks_.find(TrackKey{rank, kProcess, 0, 0});
  const uint64_t parent = found == tracks_.end() ? 0 : found->second;
  return Track({rank, kind, 0, 0}, [&](perfetto::TrackDescriptor& track) {
    if (parent != 0) track.set_parent_uuid(parent);
    if (kind == kStepTime) {
      track.set_name("step time");
      track.mutable_counter()->set_unit(perfetto::CounterDescriptor::UNIT_TIME_NS);
    } else {
      track.set_name("achieved FLOPS (counted kernels)");
      track.mutable_counter()->set_unit(perfetto::CounterDescriptor::UNIT_COUNT);
    }
  });
}

absl::Status PerfettoWriter::Add(const v1::TraceChunk& chunk) {
  if (!chunk.problem().empty()) return status_;
  definitions_.Add(chunk);
  if (chunk.has_session()) ProcessTrack(chunk);
  for (const v1::TraceActivity& activity : chunk.activities()) AddActivity(chunk, activity);
  for (const v1::TraceRange& range : chunk.ranges()) AddRange(chunk, range);
  return status_;
}

void PerfettoWriter::AddRange(const v1::TraceChunk& chunk, const v1::TraceRange& range) {
  const v1::RangeEvent& event = range.event();
  const TraceDefinitions::Path* path = definitions_.FindPath(chunk, event.path_id());
  const bool phase = path != nullptr && IsStepOrPhase(*path);
  uint64_t track = 0;
  if (event.kind() == v1::RANGE_KIND_START_END) {
    track = StartEndTrack(chunk, event);
  } else {
    track = phase ? PhaseTrack(chunk, event.thread_id()) : ThreadTrack(chunk, event.thread_id());
  }
  CloseUntil(track, static_cast<uint64_t>(event.start_ns()));
  perfetto::TracePacket& begin = NewPacket(static_cast<uint64_t>(event.start_ns()));
  TrackEvent& slice = *begin.mutable_track_event();
  slice.set_type(TrackEvent::TYPE_SLICE_BEGIN);
  slice.set_track_uuid(track);
  slice.set_name_iid(EventName(path == nullptr ? "[unknown range]" : path->name, begin));
  if (path != nullptr) Annotate(slice, "path", begin).set_string_value(path->full);
  Annotate(slice, "instance", begin).set_uint_value(event.instance_id());
  if (event.counted()) Annotate(slice, "counted", begin).set_bool_value(true);
  for (uint32_t ordinal = 0; ordinal < range.flows(); ++ordinal) {
    slice.add_flow_ids(FlowId(chunk.rank(), chunk.session_index(), event.instance_id(), ordinal));
  }
  WritePacket();
  open_ends_[track].push_back(static_cast<uint64_t>(event.end_ns()));
  if (phase && path->name == kStepRange) AddStepTime(chunk.rank(), event);
}

void PerfettoWriter::EndSlice(uint64_t track, uint64_t time_ns) {
  TrackEvent& end = *NewPacket(time_ns).mutable_track_event();
  end.set_type(TrackEvent::TYPE_SLICE_END);
  end.set_track_uuid(track);
  WritePacket();
}

void PerfettoWriter::CloseUntil(uint64_t track, uint64_t time_ns) {
  auto it = open_ends_.find(track);
  if (it == open_ends_.end()) return;
  std::vector<uint64_t>& ends = it->second;
  while (!ends.empty() && ends.back() <= time_ns) {
    EndSlice(track, ends.back());
    ends.pop_back();
  }
}

absl::Status PerfettoWriter::Finish() {
  for (auto& [track, ends] : open_ends_) {
    while (!ends.empty()) {
      EndSlice(track, ends.back());
      ends.pop_back();
    }
  }
  return status_;
}

void PerfettoWriter::AddStepTime(int32_t rank, const v1::RangeEvent& event) {
  const uint64_t track = CounterTrack(rank, kStepTime);
  TrackEvent& counter = *NewPacket(static_cast<uint64_t>(event.start_ns())).mutable_track_event();
  counter.set_type(TrackEvent::TYPE_COUNTER);
  counter.set_track_uuid(track);
  counter.set_counter_value(event.end_ns() - event.start_ns());
  WritePacket();
}

void PerfettoWriter::AddActivity(const v1::TraceChunk& chunk, const v1::TraceActivity& activity) {
  const v1::KernelRecord& kernel = activity.kernel();
  const uint64_t track = StreamTrack(chunk, kernel);
  perfetto::TracePacket& begin = NewPacket(static_cast<uint64_t>(kernel.start_ns()));
  TrackEvent& slice = *begin.mutable_track_event();
  slice.set_type(TrackEvent::TYPE_SLICE_BEGIN);
  slice.set_track_uuid(track);
  slice.set_name_iid(EventName(definitions_.ActivityName(chunk, kernel), begin));
  Annotate(slice, "module", begin).set_string_value(definitions_.ActivityModule(chunk, kernel));
  Annotate(slice, "key", begin).set_uint_value(activity.key());
  Annotate(slice, "correlation_id", begin).set_uint_value(kernel.correlation_id());
  ForEachActivityField(activity, [&](const std::string& name, const ActivityValue& value) {
    perfetto::DebugAnnotation& annotation = Annotate(slice, name, begin);
    if (const std::string* text = std::get_if<std::string>(&value)) {
      annotation.set_string_value(*text);
    } else if (const double* number = std::get_if<double>(&value)) {
      annotation.set_double_value(*number);
    } else {
      annotation.set_uint_value(std::get<uint64_t>(value));
    }
  });
  if (activity.flow()) {
    slice.add_flow_ids(FlowId(chunk.rank(), chunk.session_index(), kernel.range_instance_id(),
                              activity.launch_ordinal()));
  }
  WritePacket();
  TrackEvent& end = *NewPacket(static_cast<uint64_t>(kernel.end_ns())).mutable_track_event();
  end.set_type(TrackEvent::TYPE_SLICE_END);
  end.set_track_uuid(track);
  WritePacket();
  if (activity.has_flops()) AddFlopsRate(chunk.rank(), activity);
}

void PerfettoWriter::AddFlopsRate(int32_t rank, const v1::TraceActivity& activity) {
  const std::optional<double> rate = FlopsPerSecond(activity);
  if (!rate) return;
  const uint64_t track = CounterTrack(rank, kFlopsRate);
  const v1::KernelRecord& kernel = activity.kernel();
  TrackEvent& start = *NewPacket(static_cast<uint64_t>(kernel.start_ns())).mutable_track_event();
  start.set_type(TrackEvent::TYPE_COUNTER);
  start.set_track_uuid(track);
  start.set_double_counter_value(*rate);
  WritePacket();
  TrackEvent& stop = *NewPacket(static_cast<uint64_t>(kernel.end_ns())).mutable_track_event();
  stop.set_type(TrackEvent::TYPE_COUNTER);
  stop.set_track_uuid(track);
  stop.set_double_counter_value(0);
  WritePacket();
}

}  // namespace flopscope::client
