// The Perfetto export read back with the generated classes of proto/perfetto/trace.proto: the
// tracks, every range and activity exactly once with the parent its nesting gives, flows,
// counters and interned names, all compared with the sample trace's own fields.
#include "client/trace_export/perfetto_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "client/trace_export/testing/sample_trace.h"

namespace flopscope::client {
namespace {

using perfetto::TrackEvent;

struct Slice {
  uint64_t track = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string name;
  std::map<std::string, perfetto::DebugAnnotation> args;
  std::vector<uint64_t> flows;
  int parent = -1;  // index into the slices, from the nesting on its track
};

struct ReadBack {
  std::vector<perfetto::TracePacket> packets;
  std::map<uint64_t, perfetto::TrackDescriptor> tracks;
  std::vector<Slice> slices;
  std::map<uint64_t, std::vector<std::pair<uint64_t, double>>> counters;  // track -> (ts, value)
};

// Interned names resolved, slices rebuilt from begin/end events in time order (ties in file
// order, as trace processors sort), each parented to the slice open on its track.
ReadBack Parse(const std::string& bytes) {
  perfetto::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(bytes));
  ReadBack out;
  std::map<uint64_t, std::string> names, annotation_names;
  struct Event {
    uint64_t ts;
    size_t index;
  };
  std::vector<Event> events;
  for (int i = 0; i < trace.packet_size(); ++i) {
    const perfetto::TracePacket& packet = trace.packet(i);
    out.packets.push_back(packet);
    for (const perfetto::EventName& name : packet.interned_data().event_names()) {
      EXPECT_TRUE(names.emplace(name.iid(), name.name()).second) << "iid defined twice";
    }
    for (const perfetto::DebugAnnotationName& name :
         packet.interned_data().debug_annotation_names()) {
      EXPECT_TRUE(annotation_names.emplace(name.iid(), name.name()).second);
    }
    if (packet.has_track_descriptor()) {
      out.tracks[packet.track_descriptor().uuid()] = packet.track_descriptor();
    }
    if (packet.has_track_event()) events.push_back({packet.timestamp(), out.packets.size() - 1});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts < b.ts; });
  std::map<uint64_t, std::vector<int>> open;  // track -> stack of slice indices
  for (const Event& e : events) {
    const TrackEvent& event = out.packets[e.index].track_event();
    std::vector<int>& stack = open[event.track_uuid()];
    if (event.type() == TrackEvent::TYPE_COUNTER) {
      out.counters[event.track_uuid()].push_back(
          {e.ts, event.has_double_counter_value() ? event.double_counter_value()
                                                  : static_cast<double>(event.counter_value())});
    } else if (event.type() == TrackEvent::TYPE_SLICE_BEGIN) {
      Slice slice;
      slice.track = event.track_uuid();
      slice.start = e.ts;
      slice.name = names.at(event.name_iid());
      for (const perfetto::DebugAnnotation& arg : event.debug_annotations()) {
        slice.args[annotation_names.at(arg.name_iid())] = arg;
      }
      slice.flows.assign(event.flow_ids().begin(), event.flow_ids().end());
      slice.parent = stack.empty() ? -1 : stack.back();
      stack.push_back(static_cast<int>(out.slices.size()));
      out.slices.push_back(slice);
    } else if (event.type() == TrackEvent::TYPE_SLICE_END) {
      EXPECT_FALSE(stack.empty()) << "an end with no open slice";
      if (stack.empty()) continue;
      out.slices[stack.back()].end = e.ts;
      stack.pop_back();
    }
  }
  for (const auto& [track, stack] : open) EXPECT_TRUE(stack.empty()) << "unclosed slice";
  return out;
}

const Slice* ByArg(const ReadBack& trace, const std::string& arg, uint64_t value) {
  const Slice* found = nullptr;
  for (const Slice& slice : trace.slices) {
    auto it = slice.args.find(arg);
    if (it == slice.args.end() || it->second.uint_value() != value) continue;
    EXPECT_EQ(found, nullptr) << arg << " " << value << " appears twice";
    found = &slice;
  }
  return found;
}

uint64_t TrackNamed(const ReadBack& trace, const std::string& name) {
  for (const auto& [uuid, track] : trace.tracks) {
    if (track.name() == name || track.thread().thread_name() == name) return uuid;
  }
  return 0;
}

TEST(PerfettoWriterTest, OneSequenceClearedFirstAndEveryNameInterned) {
  const ReadBack trace = Parse(testing::WriteSampleTrace<PerfettoWriter>("perfetto-writer-test"));
  ASSERT_FALSE(trace.packets.empty());
  EXPECT_EQ(trace.packets[0].sequence_flags(),
            perfetto::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
  for (size_t i = 0; i < trace.packets.size(); ++i) {
    EXPECT_EQ(trace.packets[i].trusted_packet_sequence_id(), 1u);
    if (i > 0) {
      EXPECT_EQ(trace.packets[i].sequence_flags(),
                perfetto::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    }
    if (trace.packets[i].has_track_event()) {
      EXPECT_FALSE(trace.packets[i].track_event().has_name()) << "a name not interned";
    }
  }
}

TEST(PerfettoWriterTest, ProcessThreadPhaseAndStreamTracks) {
  const std::vector<v1::TraceChunk> sample = testing::SampleTrace();
  const v1::TraceSession& session = sample[0].session();
  const ReadBack trace = Parse(testing::WriteSampleTrace<PerfettoWriter>("perfetto-writer-test"));
  uint64_t process = 0;
  for (const auto& [uuid, track] : trace.tracks) {
    if (track.has_process()) {
      EXPECT_EQ(process, 0u) << "one process track per rank";
      process = uuid;
      EXPECT_EQ(track.process().pid(), sample[0].rank() + 1);
      EXPECT_NE(track.process().process_name().find(session.host()), std::string::npos);
    }
  }
  ASSERT_NE(process, 0u);
  const uint64_t thread = TrackNamed(trace, "thread 11");
  ASSERT_NE(thread, 0u);
  EXPECT_EQ(trace.tracks.at(thread).parent_uuid(), process);
  EXPECT_EQ(trace.tracks.at(thread).thread().tid(), 11);
  const uint64_t phases = TrackNamed(trace, "steps & phases (thread 11)");
  ASSERT_NE(phases, 0u);
  EXPECT_EQ(trace.tracks.at(phases).parent_uuid(), thread);
  const uint64_t stream = TrackNamed(trace, "GPU 0 stream 7");
  ASSERT_NE(stream, 0u);
  EXPECT_EQ(trace.tracks.at(stream).parent_uuid(), process);
}

TEST(PerfettoWriterTest, EveryRangeOnceWithTheParentItsNestingGives) {
  const std::vector<v1::TraceChunk> sample = testing::SampleTrace();
  const ReadBack trace = Parse(testing::WriteSampleTrace<PerfettoWriter>("perfetto-writer-test"));
  const uint64_t phases = TrackNamed(trace, "steps & phases (thread 11)");
  int ranges = 0;
  for (const v1::TraceRange& range : sample[1].ranges()) {
    const v1::RangeEvent& event = range.event();
    const Slice* slice = ByArg(trace, "instance", event.instance_id());
    ASSERT_NE(slice, nullptr) << "instance " << event.instance_id() << " missing";
    ++ranges;
    EXPECT_EQ(slice->start, static_cast<uint64_t>(event.start_ns()));
    EXPECT_EQ(slice->end, static_cast<uint64_t>(event.end_ns()));
    const bool is_step = event.path_id() == 3;
    EXPECT_EQ(slice->track == phases, is_step);
    const uint64_t parent =
        slice->parent < 0 ? 0 : trace.slices[slice->parent].args.at("instance").uint_value();
    EXPECT_EQ(parent, event.parent_instance_id()) << slice->name;
  }
  EXPECT_EQ(ranges, sample[1].ranges_size());
  EXPECT_EQ(ByArg(trace, "instance", 3)->args.at("path").string_value(), "model/layer");
}

TEST(PerfettoWriterTest, EveryActivityOnceWithModuleFlopsAndItsFlow) {
  const std::vector<v1::TraceChunk> sample = testing::SampleTrace();
  const ReadBack trace = Parse(testing::WriteSampleTrace<PerfettoWriter>("perfetto-writer-test"));
  const uint64_t stream = TrackNamed(trace, "GPU 0 stream 7");
  std::map<uint64_t, const Slice*> range_of_flow;
  for (const Slice& slice : trace.slices) {
    if (slice.args.count("instance") == 0) continue;
    for (uint64_t flow : slice.flows) range_of_flow[flow] = &slice;
  }
  for (const v1::TraceActivity& activity : sample[1].activities()) {
    const Slice* slice = ByArg(trace, "key", activity.key());
    ASSERT_NE(slice, nullptr) << "activity " << activity.key() << " missing";
    EXPECT_EQ(slice->track, stream);
    EXPECT_EQ(slice->start, static_cast<uint64_t>(activity.kernel().start_ns()));
    EXPECT_EQ(slice->end, static_cast<uint64_t>(activity.kernel().end_ns()));
    if (!activity.flow()) {
      EXPECT_TRUE(slice->flows.empty());
      EXPECT_EQ(slice->args.at("module").string_value(), "<unattributed>");
      continue;
    }
    ASSERT_EQ(slice->flows.size(), 1u);
    const Slice* launcher = range_of_flow.at(slice->flows[0]);
    EXPECT_EQ(launcher->args.at("instance").uint_value(), activity.kernel().range_instance_id());
    EXPECT_EQ(slice->args.at("module").string_value(), launcher->args.at("path").string_value());
  }
  const Slice* gemm = ByArg(trace, "key", 10);
  EXPECT_EQ(gemm->name, "gemm_kernel");
  EXPECT_DOUBLE_EQ(gemm->args.at("flops:fp32").double_value(),
                   sample[1].activities(1).flops().fp32());
  EXPECT_EQ(ByArg(trace, "key", 11)->name, "[memcpy]");
  EXPECT_EQ(ByArg(trace, "key", 11)->args.at("bytes").uint_value(),
            sample[1].activities(2).kernel().bytes());
}

TEST(PerfettoWriterTest, StepTimeAndAchievedFlopsCounters) {
  const std::vector<v1::TraceChunk> sample = testing::SampleTrace();
  const ReadBack trace = Parse(testing::WriteSampleTrace<PerfettoWriter>("perfetto-writer-test"));
  const v1::RangeEvent& step = sample[1].ranges(0).event();
  const auto& step_time = trace.counters.at(TrackNamed(trace, "step time"));
  ASSERT_EQ(step_time.size(), 1u);
  EXPECT_EQ(step_time[0].first, static_cast<uint64_t>(step.start_ns()));
  EXPECT_EQ(step_time[0].second, static_cast<double>(step.end_ns() - step.start_ns()));
  const v1::TraceActivity& gemm = sample[1].activities(1);
  const auto& rate = trace.counters.at(TrackNamed(trace, "achieved FLOPS (counted kernels)"));
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_DOUBLE_EQ(rate[0].second,
                   gemm.flops().fp32() * 1e9 /
                       static_cast<double>(gemm.kernel().end_ns() - gemm.kernel().start_ns()));
  EXPECT_EQ(rate[1].first, static_cast<uint64_t>(gemm.kernel().end_ns()));
  EXPECT_EQ(rate[1].second, 0);
}

TEST(PerfettoWriterTest, KernelsOverlappingOnAStreamGoToALaneBesideIt) {
  std::vector<v1::TraceChunk> sample = testing::SampleTrace();
  // A second kernel on the gemm's stream, starting before the gemm ends.
  v1::TraceActivity overlap = sample[1].activities(1);
  overlap.set_key(13);
  overlap.set_flow(false);
  overlap.clear_flops();
  overlap.mutable_kernel()->set_start_ns(sample[1].activities(1).kernel().end_ns() - 100);
  overlap.mutable_kernel()->set_end_ns(sample[1].activities(1).kernel().end_ns() + 100);
  *sample[1].mutable_activities()->Add() = overlap;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("perfetto-lanes-test-" + std::to_string(getpid()) + ".pftrace"))
                               .string();
  TraceFile file;
  ASSERT_TRUE(file.Open(path).ok());
  PerfettoWriter writer(file);
  for (const v1::TraceChunk& chunk : sample) ASSERT_TRUE(writer.Add(chunk).ok());
  ASSERT_TRUE(writer.Finish().ok());
  ASSERT_TRUE(file.Close().ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::filesystem::remove(path);
  const ReadBack trace = Parse(bytes.str());
  const Slice* gemm = ByArg(trace, "key", 10);
  const Slice* lane = ByArg(trace, "key", 13);
  ASSERT_NE(lane, nullptr);
  EXPECT_EQ(gemm->track, TrackNamed(trace, "GPU 0 stream 7"));
  EXPECT_EQ(lane->track, TrackNamed(trace, "GPU 0 stream 7 (overlap 1)"));
  EXPECT_EQ(lane->start, static_cast<uint64_t>(overlap.kernel().start_ns()));
  EXPECT_EQ(lane->end, static_cast<uint64_t>(overlap.kernel().end_ns()));
  EXPECT_EQ(gemm->end, static_cast<uint64_t>(sample[1].activities(1).kernel().end_ns()));
}

}  // namespace
}  // namespace flopscope::client
