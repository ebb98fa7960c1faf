#include "importer/kineto_event_reader.h"

#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importer/json_fields.h"
#include "importer/micros_text.h"
#include "importer/range_role.h"
#include "importer/text_sanitizer.h"

namespace flopscope::importer {
namespace {

constexpr absl::string_view kModulePrefix = "nn.Module: ";

absl::Status EventError(uint64_t offset, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("offset ", offset, ": ", problem));
}

// The API calls whose correlation ids lead to kernels, for ordinal joins of counter samples.
bool LaunchesKernel(absl::string_view api) {
  return absl::StrContains(api, "LaunchKernel") ||
         absl::StrContains(api, "LaunchCooperativeKernel") || api == "cudaLaunch" ||
         absl::StartsWith(api, "cuLaunchGrid") || api == "cuLaunch";
}

uint32_t ToU32(std::optional<uint64_t> value) {
  return value.has_value() && *value <= UINT32_MAX ? static_cast<uint32_t>(*value) : 0;
}

// A Kineto "grid"/"block" array of three integers.
void ReadDims(simdjson::dom::element args, absl::string_view key, uint32_t dims[3]) {
  simdjson::dom::array array;
  if (args[StdView(key)].get_array().get(array) != simdjson::SUCCESS) return;
  size_t i = 0;
  for (simdjson::dom::element value : array) {
    if (i == 3) break;
    const std::optional<int64_t> n = IntValue(value);
    dims[i++] = n.has_value() && *n >= 0 && *n <= UINT32_MAX ? static_cast<uint32_t>(*n) : 0;
  }
}

uint64_t ExternalId(simdjson::dom::element args) {
  std::optional<uint64_t> id = UintField(args, "External id");
  if (!id.has_value()) id = UintField(args, "external id");  // legacy spelling
  return id.value_or(0);
}

}  // namespace

KinetoEventReader::Category KinetoEventReader::Classify(absl::string_view category) {
  if (category == "kernel") return Category::kKernel;
  if (category == "cuda_runtime" || category == "cuda_driver") return Category::kRuntime;
  if (category == "python_function") return Category::kPythonFunction;
  if (category == "user_annotation") return Category::kAnnotation;
  if (category == "gpu_user_annotation") return Category::kGpuAnnotation;
  if (category == "gpu_memcpy") return Category::kMemcpy;
  if (category == "gpu_memset") return Category::kMemset;
  if (category == "cuda_profiler_range") return Category::kCounterRange;
  // Kineto before 2022 (legacy names).
  Category legacy = Category::kIgnored;
  if (category == "Kernel") legacy = Category::kKernel;
  if (category == "Runtime") legacy = Category::kRuntime;
  if (category == "Memcpy") legacy = Category::kMemcpy;
  if (category == "Memset") legacy = Category::kMemset;
  if (category == "Operator") legacy = Category::kLegacyOperator;
  if (legacy != Category::kIgnored) saw_legacy_ = true;
  return legacy;
}

absl::Status KinetoEventReader::Read(absl::string_view json, uint64_t offset) {
  ++recording_->events_read;
  padded_.resize(json.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(padded_.data(), json.data(), json.size());
  simdjson::dom::element event;
  if (const simdjson::error_code error =
          parser_.parse(padded_.data(), json.size(), false).get(event);
      error != simdjson::SUCCESS) {
    return EventError(
        offset, absl::StrCat("invalid JSON in a trace event: ", simdjson::error_message(error)));
  }
  if (!event.is_object()) return EventError(offset, "a trace event is not a JSON object");
  if (StringField(event, "ph") != "X") return absl::OkStatus();  // only complete events matter
  const Category category = Classify(StringField(event, "cat"));
  const absl::string_view name = StringField(event, "name");
  if (!Matters(category, name)) return absl::OkStatus();
  Interval at;
  if (absl::Status s = ReadInterval(json, event, offset, &at); !s.ok()) return s;
  return Dispatch(event, category, name, at, offset);
}

bool KinetoEventReader::Matters(Category category, absl::string_view name) {
  switch (category) {
    case Category::kIgnored:
      return false;
    case Category::kPythonFunction:
      return absl::StartsWith(name, kModulePrefix);  // the other frames are Python calls
    case Category::kLegacyOperator:
      // An operator, unless its name makes it a step or phase annotation.
      return ClassifyAnnotation(name).role != RangeRole::kModule;
    default:
      return true;
  }
}

absl::Status KinetoEventReader::Dispatch(simdjson::dom::element event, Category category,
                                         absl::string_view name, const Interval& at,
                                         uint64_t offset) {
  switch (category) {
    case Category::kKernel:
    case Category::kMemcpy:
    case Category::kMemset:
      return ReadActivity(event, category, at, offset);
    case Category::kRuntime:
      NotePid(event);
      ReadLaunch(event, name, at.start_ns);
      break;
    case Category::kPythonFunction:
      NotePid(event);
      ReadRange(event, RangeOrigin::kPythonModule, name.substr(kModulePrefix.size()), at);
      break;
    case Category::kAnnotation:
    case Category::kLegacyOperator:
      NotePid(event);
      ReadRange(event, RangeOrigin::kAnnotation, name, at);
      break;
    case Category::kGpuAnnotation:
      ReadRange(event, RangeOrigin::kGpuAnnotation, name, at);
      break;
    case Category::kCounterRange:
      ReadCounterSample(event, name, at);
      break;
    case Category::kIgnored:
      break;
  }
  return absl::OkStatus();
}

// The profiled process: the pid of its CPU-side events (GPU rows use the device as pid).
void KinetoEventReader::NotePid(simdjson::dom::element event) {
  if (recording_->pid <= 0) recording_->pid = IntField(event, "pid").value_or(0);
}

absl::Status KinetoEventReader::ReadInterval(absl::string_view json, simdjson::dom::element event,
                                             uint64_t offset, Interval* interval) {
  const EventTimeText text = FindEventTimeText(json);
  std::optional<int64_t> ts = MicrosTextToNanos(text.ts);
  if (!ts.has_value()) {
    return EventError(offset, absl::StrCat("a '", StringField(event, "cat"),
                                           "' event has no valid ts (microseconds)"));
  }
  int64_t dur = 0;
  if (!text.dur.empty()) {
    std::optional<int64_t> parsed = MicrosTextToNanos(text.dur);
    if (!parsed.has_value()) return EventError(offset, "an event's dur is not a number");
    dur = *parsed;
  }
  if (dur < 0) {
    ++recording_->negative_durations;  // seen in traces cut mid-event; kept as instants
    dur = 0;
  }
  if (*ts > INT64_MAX - dur) return EventError(offset, "an event's ts + dur overflows");
  interval->start_ns = *ts;
  interval->end_ns = *ts + dur;
  return absl::OkStatus();
}

absl::Status KinetoEventReader::ReadActivity(simdjson::dom::element event, Category category,
                                             const Interval& at, uint64_t offset) {
  simdjson::dom::element args;
  if (event["args"].get(args) != simdjson::SUCCESS || !args.is_object()) {
    return EventError(offset, "a GPU activity event has no args object");
  }
  GpuActivity activity;
  activity.kind = category == Category::kKernel   ? v1::ACTIVITY_KIND_KERNEL
                  : category == Category::kMemcpy ? v1::ACTIVITY_KIND_MEMCPY
                                                  : v1::ACTIVITY_KIND_MEMSET;
  activity.correlation_id = UintField(args, "correlation").value_or(0);
  std::optional<uint64_t> device = UintField(args, "device");
  if (!device.has_value()) device = UintField(event, "pid");  // GPU rows use the device as pid
  activity.device = ToU32(device);
  activity.context = ToU32(UintField(args, "context"));
  activity.stream = ToU32(UintField(args, "stream"));
  activity.start_ns = at.start_ns;
  activity.end_ns = at.end_ns;
  if (activity.kind == v1::ACTIVITY_KIND_KERNEL) {
    activity.name = InternName(StringField(event, "name"), kMaxStringBytes);
    if (activity.name == 0) activity.name = recording_->strings.Intern("<unnamed kernel>");
    ReadDims(args, "grid", activity.grid);
    ReadDims(args, "block", activity.block);
  } else {
    activity.bytes = UintField(args, "bytes").value_or(0);
  }
  recording_->activities.push_back(activity);
  return absl::OkStatus();
}

void KinetoEventReader::ReadLaunch(simdjson::dom::element event, absl::string_view name,
                                   int64_t time_ns) {
  simdjson::dom::element args;
  if (event["args"].get(args) != simdjson::SUCCESS) return;
  const std::optional<uint64_t> correlation = UintField(args, "correlation");
  if (!correlation.has_value() || *correlation == 0) return;  // not a launch (cudaMalloc, ...)
  simdjson::dom::element tid;
  LaunchSite site;
  site.thread = event["tid"].get(tid) == simdjson::SUCCESS ? IdKey(tid) : 0;
  site.time_ns = time_ns;
  site.launches_kernel = LaunchesKernel(name);
  recording_->launches.insert_or_assign(*correlation, site);
}

void KinetoEventReader::ReadRange(simdjson::dom::element event, RangeOrigin origin,
                                  absl::string_view name, const Interval& at) {
  RawRange range;
  range.origin = origin;
  range.start_ns = at.start_ns;
  range.end_ns = at.end_ns;
  range.name = InternName(name, kMaxNameBytes);
  if (range.name == 0) range.name = recording_->strings.Intern("<unnamed>");
  simdjson::dom::element args;
  const bool has_args = event["args"].get(args) == simdjson::SUCCESS && args.is_object();
  if (has_args) range.external_id = ExternalId(args);
  simdjson::dom::element tid;
  const uint64_t thread = event["tid"].get(tid) == simdjson::SUCCESS ? IdKey(tid) : 0;
  range.thread = thread;
  if (origin == RangeOrigin::kGpuAnnotation) {
    // On the GPU rows the pid is the device and the tid the stream.
    std::optional<uint64_t> device = has_args ? UintField(args, "device") : std::nullopt;
    if (!device.has_value()) device = UintField(event, "pid");
    range.thread = StreamKey(ToU32(device), static_cast<uint32_t>(thread));
  }
  recording_->ranges.push_back(range);
}

void KinetoEventReader::ReadCounterSample(simdjson::dom::element event, absl::string_view name,
                                          const Interval& at) {
  CounterSample sample;
  sample.name = InternName(name, kMaxStringBytes);
  if (sample.name == 0) sample.name = recording_->strings.Intern("<unnamed kernel>");
  sample.start_ns = at.start_ns;
  sample.end_ns = at.end_ns;
  simdjson::dom::object args;
  if (event["args"].get_object().get(args) == simdjson::SUCCESS) {
    for (const simdjson::dom::key_value_pair field : args) {
      const std::optional<double> value = NumberValue(field.value);
      if (!value.has_value() || !std::isfinite(*value)) continue;
      sample.counters.emplace_back(InternName(AbslView(field.key), kMaxNameBytes), *value);
    }
  }
  recording_->counter_samples.push_back(std::move(sample));
}

uint32_t KinetoEventReader::InternName(absl::string_view name, size_t max_bytes) {
  // simdjson has already checked UTF-8; only NULs (from "\u0000") and length need care.
  if (name.size() <= max_bytes && name.find('\0') == absl::string_view::npos) {
    return recording_->strings.Intern(name);
  }
  return recording_->strings.Intern(CleanText(name, max_bytes));
}

}  // namespace flopscope::importer
