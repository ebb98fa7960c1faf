// The Chrome trace-event JSON export (see chrome_writer.h).
#include "client/trace_export/chrome_writer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/trace_export/activity_fields.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::client {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;
constexpr int64_t kBaseMarginNs = 3600 * kSecondNs;
constexpr uint64_t kStartEndTid = uint64_t{1} << 28;
constexpr uint64_t kPhaseTidBase = uint64_t{1} << 29;
constexpr uint64_t kStreamTidBase = uint64_t{1} << 30;

// Lanes (lanes.h) below 64, devices below 256, streams below 65536 keep the tids apart.
uint64_t StreamTid(const v1::KernelRecord& kernel, uint32_t lane) {
  return kStreamTidBase | (uint64_t{lane} << 24) | (uint64_t{kernel.device_id() & 0xff} << 16) |
         (kernel.stream_id() & 0xffff);
}

const char* ActivityCategory(const v1::KernelRecord& kernel) {
  if (kernel.kind() == v1::ACTIVITY_KIND_MEMCPY) return "memcpy";
  if (kernel.kind() == v1::ACTIVITY_KIND_MEMSET) return "memset";
  return "kernel";
}

std::string FlowIdText(uint64_t id) { return absl::StrCat("0x", absl::Hex(id)); }

}  // namespace

double ChromeWriter::Micros(int64_t ns) const {
  return static_cast<double>(ns - base_ns_) / 1000.0;
}

JsonWriter& ChromeWriter::BeginEvent(const char* phase, int32_t rank, uint64_t tid) {
  event_ = JsonWriter(0);
  event_.BeginObject().Key("ph").String(phase).Key("pid").Int(rank + 1).Key("tid").Uint(tid);
  return event_;
}

void ChromeWriter::EndEvent() {
  event_.EndObject();
  if (!status_.ok()) return;
  std::string text = any_event_ ? ",\n" : "\n";
  text += event_.Finish();
  text.pop_back();  // Finish's newline: the separator before the next event brings one
  any_event_ = true;
  status_ = out_.Write(text);
}

void ChromeWriter::NameProcess(const v1::TraceChunk& chunk) {
  if (!named_processes_.insert(chunk.rank()).second) return;
  JsonWriter& e = BeginEvent("M", chunk.rank(), 0);
  e.Key("name")
      .String("process_name")
      .Key("args")
      .BeginObject()
      .Key("name")
      .String(ProcessName(chunk));
  e.EndObject();
  EndEvent();
  JsonWriter& order = BeginEvent("M", chunk.rank(), 0);
  order.Key("name")
      .String("process_sort_index")
      .Key("args")
      .BeginObject()
      .Key("sort_index")
      .Int(chunk.rank());
  order.EndObject();
  EndEvent();
}

void ChromeWriter::NameThread(int32_t rank, uint64_t tid, const std::string& name) {
  if (!named_threads_.insert({rank, tid}).second) return;
  JsonWriter& e = BeginEvent("M", rank, tid);
  e.Key("name").String("thread_name").Key("args").BeginObject().Key("name").String(name);
  e.EndObject();
  EndEvent();
}

absl::Status ChromeWriter::Add(const v1::TraceChunk& chunk) {
  if (!chunk.problem().empty()) return status_;
  if (!started_ && chunk.has_session()) {
    started_ = true;
    const int64_t start = chunk.session().start_time_ns();
    base_ns_ = std::max<int64_t>(0, start / kSecondNs * kSecondNs - kBaseMarginNs);
    status_ =
        out_.Write(absl::StrCat("{\"displayTimeUnit\": \"ns\", \"baseTimeNanoseconds\": ", base_ns_,
                                ", \"traceEvents\": ["));
  }
  if (!started_) return status_;
  definitions_.Add(chunk);
  if (chunk.has_session()) NameProcess(chunk);
  for (const v1::TraceActivity& activity : chunk.activities()) AddActivity(chunk, activity);
  for (const v1::TraceRange& range : chunk.ranges()) AddRange(chunk, range);
  return status_;
}

absl::Status ChromeWriter::Finish() {
  if (!status_.ok()) return status_;
  if (!started_) return out_.Write("{\"displayTimeUnit\": \"ns\", \"traceEvents\": []}\n");
  return out_.Write("\n]}\n");
}

void ChromeWriter::AddRange(const v1::TraceChunk& chunk, const v1::TraceRange& range) {
  const v1::RangeEvent& event = range.event();
  const TraceDefinitions::Path* path = definitions_.FindPath(chunk, event.path_id());
  const bool phase = path != nullptr && IsStepOrPhase(*path);
  uint64_t tid = event.thread_id();
  if (event.kind() == v1::RANGE_KIND_START_END) {
    const uint32_t lane = lanes_.Assign({chunk.rank(), 0, 0}, event.start_ns(), event.end_ns());
    tid = kStartEndTid + lane;
    NameThread(chunk.rank(), tid, LaneName("start/end ranges", lane));
  } else if (phase) {
    tid = kPhaseTidBase + event.thread_id();
    NameThread(chunk.rank(), tid, absl::StrCat("steps & phases (thread ", event.thread_id(), ")"));
  } else {
    NameThread(chunk.rank(), tid, absl::StrCat("thread ", tid));
  }
  JsonWriter& e = BeginEvent("X", chunk.rank(), tid);
  e.Key("name").String(path == nullptr ? "[unknown range]" : path->name);
  e.Key("cat").String(phase ? "phase" : "range");
  e.Key("ts").Double(Micros(event.start_ns()));
  e.Key("dur").Double(static_cast<double>(event.end_ns() - event.start_ns()) / 1000.0);
  e.Key("args").BeginObject();
  if (path != nullptr) e.Key("path").String(path->full);
  e.Key("instance").Uint(event.instance_id());
  if (event.counted()) e.Key("counted").Bool(true);
  e.EndObject();
  EndEvent();
  for (uint32_t ordinal = 0; ordinal < range.flows(); ++ordinal) {
    JsonWriter& flow = BeginEvent("s", chunk.rank(), tid);
    flow.Key("name").String("launch").Key("cat").String("launch");
    flow.Key("id").String(
        FlowIdText(FlowId(chunk.rank(), chunk.session_index(), event.instance_id(), ordinal)));
    flow.Key("ts").Double(Micros(event.start_ns()));
    EndEvent();
  }
  if (phase && path->name == kStepRange) {
    AddCounter(chunk.rank(), "step time", "ms", event.start_ns(),
               static_cast<double>(event.end_ns() - event.start_ns()) / 1e6);
  }
}

void ChromeWriter::AddActivity(const v1::TraceChunk& chunk, const v1::TraceActivity& activity) {
  const v1::KernelRecord& kernel = activity.kernel();
  const uint64_t stream = (uint64_t{kernel.device_id()} << 32) | kernel.stream_id();
  const uint32_t lane =
      lanes_.Assign({chunk.rank(), 1, stream}, kernel.start_ns(), kernel.end_ns());
  const uint64_t tid = StreamTid(kernel, lane);
  NameThread(chunk.rank(), tid, LaneName(StreamName(kernel), lane));
  JsonWriter& e = BeginEvent("X", chunk.rank(), tid);
  e.Key("name").String(definitions_.ActivityName(chunk, kernel));
  e.Key("cat").String(ActivityCategory(kernel));
  e.Key("ts").Double(Micros(kernel.start_ns()));
  e.Key("dur").Double(static_cast<double>(kernel.end_ns() - kernel.start_ns()) / 1000.0);
  e.Key("args").BeginObject();
  e.Key("module").String(definitions_.ActivityModule(chunk, kernel));
  e.Key("key").Uint(activity.key());
  e.Key("correlation_id").Uint(kernel.correlation_id());
  ForEachActivityField(activity, [&](const std::string& name, const ActivityValue& value) {
    e.Key(name);
    if (const std::string* text = std::get_if<std::string>(&value)) {
      e.String(*text);
    } else if (const double* number = std::get_if<double>(&value)) {
      e.Double(*number);
    } else {
      e.Uint(std::get<uint64_t>(value));
    }
  });
  e.EndObject();
  EndEvent();
  if (activity.flow()) {
    JsonWriter& flow = BeginEvent("f", chunk.rank(), tid);
    flow.Key("name").String("launch").Key("cat").String("launch").Key("bp").String("e");
    flow.Key("id").String(
        FlowIdText(FlowId(chunk.rank(), chunk.session_index(), kernel.range_instance_id(),
                          activity.launch_ordinal())));
    flow.Key("ts").Double(Micros(kernel.start_ns()));
    EndEvent();
  }
  if (std::optional<double> rate = FlopsPerSecond(activity)) {
    AddCounter(chunk.rank(), "achieved FLOPS", "FLOPS", kernel.start_ns(), *rate);
    AddCounter(chunk.rank(), "achieved FLOPS", "FLOPS", kernel.end_ns(), 0);
  }
}

void ChromeWriter::AddCounter(int32_t rank, const char* name, const char* unit, int64_t at_ns,
                              double value) {
  JsonWriter& e = BeginEvent("C", rank, 0);
  e.Key("name").String(name).Key("ts").Double(Micros(at_ns));
  e.Key("args").BeginObject().Key(unit).Double(value).EndObject();
  EndEvent();
}

}  // namespace flopscope::client
