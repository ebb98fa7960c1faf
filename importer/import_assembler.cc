#include "importer/import_assembler.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flop_formulas.h"
#include "common/version.h"
#include "importer/counter_joiner.h"
#include "importer/range_nester.h"
#include "importer/text_sanitizer.h"
#include "importer/time_base.h"

namespace flopscope::importer {
namespace {

// Bumped when the importer turns the same file into different records, so a re-import after
// an upgrade is a new session rather than a skipped one.
constexpr uint64_t kRecordFormatRevision = 1;

void PutMetadata(ImportPlan* plan, absl::string_view key, absl::string_view value) {
  v1::Metadata* entry = &plan->metadata.emplace_back();
  entry->set_key(std::string(key));
  entry->set_value(CleanText(value, kMaxMetadataValueBytes));
}

}  // namespace

std::string ImportSessionId(uint64_t content_digest, int32_t rank) {
  const uint64_t mixed = content_digest ^ (kRecordFormatRevision * 0x9E3779B97F4A7C15ull);
  return absl::StrFormat("import-%016x-r%d", mixed, rank);
}

absl::StatusOr<ImportPlan> ImportAssembler::Assemble(TraceRecording recording,
                                                     const AssemblyOptions& options) {
  ImportPlan plan;
  plan.recording = std::move(recording);
  ImportAssembler assembler(&plan, options);
  const CounterJoiner::Result counters = CounterJoiner::Join(&plan.recording, &plan.flops);
  RangeNester nester(plan.recording);
  nester.Run();
  plan.paths = nester.paths().paths();
  plan.ranges = std::move(nester.ranges());
  assembler.Attribute(nester);
  assembler.AssignCountedSteps(nester);
  if (absl::Status s = assembler.ChooseTime(); !s.ok()) return s;
  assembler.Count();
  assembler.AddMetadata(nester, counters);
  assembler.AddLosses(nester);
  assembler.BuildHello();
  return plan;
}

void ImportAssembler::Attribute(const RangeNester& nester) {
  const TraceRecording& recording = plan_.recording;
  std::vector<ThreadTimeline::Point> points;
  points.reserve(recording.activities.size());
  for (const GpuActivity& activity : recording.activities) {
    const auto launch = recording.launches.find(activity.correlation_id);
    if (activity.correlation_id != 0 && launch != recording.launches.end()) {
      points.push_back({launch->second.thread, launch->second.time_ns});
    } else {
      // No launch: only a GPU annotation on the activity's own stream can claim it.
      points.push_back({StreamKey(activity.device, activity.stream), activity.start_ns});
      if (activity.kind == v1::ACTIVITY_KIND_KERNEL) ++plan_.counts.kernels_without_launch;
    }
  }
  const std::vector<int64_t> innermost = nester.modules().Innermost(points);
  plan_.attributions.resize(recording.activities.size());
  for (size_t i = 0; i < innermost.size(); ++i) {
    if (innermost[i] >= 0) plan_.attributions[i] = nester.module_targets()[innermost[i]];
  }
}

void ImportAssembler::AssignCountedSteps(const RangeNester& nester) {
  if (plan_.flops.empty()) return;
  std::vector<ThreadTimeline::Point> points;
  std::vector<size_t> activities;
  for (const auto& [index, flops] : plan_.flops) {
    const auto launch =
        plan_.recording.launches.find(plan_.recording.activities[index].correlation_id);
    if (launch == plan_.recording.launches.end()) continue;
    points.push_back({launch->second.thread, launch->second.time_ns});
    activities.push_back(index);
  }
  const std::vector<int64_t> step = nester.steps().Innermost(points);
  const std::vector<int64_t> phase = nester.flopscope_ranges().Innermost(points);
  for (size_t i = 0; i < activities.size(); ++i) {
    CountedContext& context = plan_.counted_context[activities[i]];
    if (step[i] >= 0) context.step = nester.step_numbers()[step[i]];
    if (phase[i] >= 0) context.phase_path_id = nester.flopscope_paths()[phase[i]];
  }
}

absl::Status ImportAssembler::ChooseTime() {
  int64_t min_ns = std::numeric_limits<int64_t>::max();
  int64_t max_ns = std::numeric_limits<int64_t>::min();
  const auto include = [&](int64_t start, int64_t end) {
    min_ns = std::min(min_ns, start);
    max_ns = std::max(max_ns, end);
  };
  for (const PlannedRange& range : plan_.ranges) include(range.start_ns, range.end_ns);
  for (const GpuActivity& activity : plan_.recording.activities) {
    include(activity.start_ns, activity.end_ns);
  }
  for (const TraceMark& mark : plan_.recording.marks) include(mark.time_ns, mark.time_ns);
  if (min_ns > max_ns) min_ns = max_ns = 0;  // nothing timed: only the hello and metadata
  absl::StatusOr<TimeBase> base = ChooseTimeBase(min_ns, max_ns, plan_.recording.base_time_ns,
                                                 plan_.recording.base_is_required, options_.now);
  if (!base.ok()) return base.status();
  plan_.time_offset_ns = base->offset_ns;
  time_base_ = base->how;
  return absl::OkStatus();
}

void ImportAssembler::Count() {
  ImportCounts& counts = plan_.counts;
  counts.ranges = plan_.ranges.size();
  for (size_t i = 0; i < plan_.recording.activities.size(); ++i) {
    switch (plan_.recording.activities[i].kind) {
      case v1::ACTIVITY_KIND_KERNEL:
        ++counts.kernels;
        if (plan_.attributions[i].path_id != 0) ++counts.attributed_kernels;
        break;
      case v1::ACTIVITY_KIND_MEMCPY:
        ++counts.memcpys;
        break;
      default:
        ++counts.memsets;
        break;
    }
  }
  for (const auto& [index, flops] : plan_.flops) {
    ++counts.kernels_with_flops;
    counts.flops += flops.fp64() + flops.fp32() + flops.fp16();
    for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) counts.flops += tensor.flops();
  }
}

void ImportAssembler::AddMetadata(const RangeNester& nester,
                                  const CounterJoiner::Result& counters) {
  const TraceRecording& recording = plan_.recording;
  PutMetadata(&plan_, "import.source", recording.path);
  PutMetadata(&plan_, "import.format",
              recording.format_version.empty()
                  ? recording.format
                  : absl::StrCat(recording.format, " (schema ", recording.format_version, ")"));
  PutMetadata(&plan_, "import.time_base", time_base_);
  PutMetadata(&plan_, "import.time_offset_ns", absl::StrCat(plan_.time_offset_ns));
  PutMetadata(&plan_, "import.unattributed_kernels",
              absl::StrCat(plan_.counts.kernels - plan_.counts.attributed_kernels));
  PutMetadata(&plan_, "import.kernels_without_launch",
              absl::StrCat(plan_.counts.kernels_without_launch));
  if (nester.gpu_duplicates() > 0) {
    PutMetadata(&plan_, "import.gpu_annotations_merged", absl::StrCat(nester.gpu_duplicates()));
  }
  if (!counters.how.empty()) {
    PutMetadata(&plan_, "import.counter_join", counters.how);
    PutMetadata(&plan_, "import.counter_samples_unmatched", absl::StrCat(counters.unmatched));
  }
  if (!plan_.flops.empty()) PutMetadata(&plan_, "import.fp16_convention", kFp16Convention);
  if (recording.negative_durations > 0) {
    PutMetadata(&plan_, "import.negative_durations_clamped",
                absl::StrCat(recording.negative_durations));
  }
  for (const TraceMark& mark : recording.marks) {
    v1::Metadata* entry = &plan_.metadata.emplace_back();
    entry->set_key(mark.key.empty() ? "mark" : mark.key);
    entry->set_value(mark.value);
    entry->set_time_ns(mark.time_ns + plan_.time_offset_ns);
  }
}

void ImportAssembler::AddLosses(const RangeNester& nester) {
  const auto add = [this](v1::LossCause cause, uint64_t records) {
    if (records == 0) return;
    v1::LossCounter* loss = &plan_.losses.emplace_back();
    loss->set_cause(cause);
    loss->set_records(records);
  };
  add(v1::LOSS_CAUSE_STACK_OVERFLOW, nester.overflowed());
  add(v1::LOSS_CAUSE_UNCLOSED_RANGE, plan_.recording.unclosed_ranges);
}

void ImportAssembler::BuildHello() {
  const TraceRecording& recording = plan_.recording;
  v1::SessionHello& hello = plan_.hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_session_id(ImportSessionId(recording.content_digest, options_.rank));
  // A re-import of the same file resumes (and dedups into) the same session, so its resume token
  // comes from the content too: who holds the file and may write to the job resumes it. Across
  // users the job's owner check is the guard (docs/architecture.md, "Access model").
  hello.set_resume_token(
      absl::StrFormat("import-%016x-%d", recording.content_digest, options_.rank));
  hello.set_job_id(options_.job_id);
  hello.set_rank(options_.rank);
  hello.set_local_rank(0);
  const int32_t world = std::max(recording.world_size, options_.rank + 1);
  hello.set_world_size(world);
  hello.mutable_layout()->set_dp_size(static_cast<uint32_t>(world));
  hello.mutable_layout()->set_dp_rank(static_cast<uint32_t>(options_.rank));
  hello.mutable_layout()->set_source("default");
  hello.set_host(recording.host);
  hello.set_pid(recording.pid);
  absl::flat_hash_set<uint32_t> used;
  for (const GpuActivity& activity : recording.activities) used.insert(activity.device);
  for (const v1::Device& device : recording.devices) {
    if (used.empty() || used.contains(device.index())) *hello.add_devices() = device;
  }
  hello.set_injector_version(absl::StrCat("flopscope-import ", kVersion));
  int64_t start = std::numeric_limits<int64_t>::max();
  for (const PlannedRange& range : plan_.ranges) start = std::min(start, range.start_ns);
  for (const GpuActivity& activity : recording.activities) {
    start = std::min(start, activity.start_ns);
  }
  hello.set_start_time_ns(
      start == std::numeric_limits<int64_t>::max() ? 0 : start + plan_.time_offset_ns);
  hello.set_command(CleanText(absl::StrCat("flopscope import ", recording.path), 65536));
  if (recording.activities.empty()) hello.set_gpu_status("no GPU activity in the imported trace");
}

}  // namespace flopscope::importer
