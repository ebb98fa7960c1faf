#include "daemon/validate/batch_validator.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "daemon/validate/text_checks.h"

namespace flopscope::daemon {
namespace {

// Text checks return "" when fine; this prefixes the field name to a problem.
std::string FieldProblem(absl::string_view field, const std::string& problem) {
  return problem.empty() ? problem : absl::StrCat(field, " ", problem);
}

bool IsCount(double value) { return std::isfinite(value) && value >= 0; }

// The status payload that carries the broken rule (RejectedRule).
constexpr absl::string_view kRulePayload = "type.flopscope.dev/rejected-rule";

absl::Status Rejection(absl::string_view rule, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kRulePayload, absl::Cord(rule));
  return status;
}

}  // namespace

size_t BatchRecordCount(const v1::Batch& batch) {
  return static_cast<size_t>(batch.strings_size()) + batch.paths_size() + batch.ranges_size() +
         batch.kernels_size() + batch.metadata_size() + batch.losses_size() +
         batch.kernel_flops_size() + batch.windows_size();
}

std::string RejectedRule(const absl::Status& status) {
  const absl::optional<absl::Cord> rule = status.GetPayload(kRulePayload);
  return rule.has_value() ? std::string(*rule) : "other";
}

BatchValidator::BatchValidator(const SessionDefinitions& known, absl::Time now,
                               int64_t session_start_ns, BatchOrigin origin)
    : known_(known),
      latest_ns_(absl::ToUnixNanos(now + absl::Hours(24))),
      session_start_ns_(session_start_ns),
      origin_(origin) {}

absl::Status BatchValidator::Validate(const v1::Batch& batch, SessionDefinitions* added) {
  seq_ = batch.seq();
  added_ = added;
  added_->Clear();
  if (seq_ == 0) return Rejection("seq", "batch seq 0: seq must be > 0");
  if (seq_ > kMaxSeq) {
    return Rejection("seq", absl::StrCat("batch seq ", seq_, ": seq must be at most ", kMaxSeq));
  }
  // Counts first: cheap, and they bound the work of everything after. Definitions before the
  // records that use them.
  absl::Status status = CheckCounts(batch);
  if (status.ok()) status = CheckStrings(batch);
  if (status.ok()) status = CheckPaths(batch);
  if (status.ok()) status = CheckRanges(batch);
  if (status.ok()) status = CheckKernels(batch);
  if (status.ok()) status = CheckKernelFlops(batch);
  if (status.ok()) status = CheckWindows(batch);
  if (status.ok()) status = CheckMetadata(batch);
  if (status.ok()) status = CheckLosses(batch);
  if (status.ok()) status = CheckOpenRanges(batch);
  return status;
}

absl::Status BatchValidator::CheckCounts(const v1::Batch& batch) const {
  const size_t records = BatchRecordCount(batch);
  if (records > kMaxRecordsPerBatch) {
    return Rejection("limits",
                     absl::StrCat("batch seq ", seq_, ": holds ", records, " records (at most ",
                                  kMaxRecordsPerBatch, " per batch)"));
  }
  if (known_.path_count() + batch.paths_size() > kMaxPathsPerSession ||
      known_.string_count() + batch.strings_size() > kMaxStringsPerSession) {
    return Rejection(
        "limits",
        absl::StrCat("batch seq ", seq_, ": the session would define more than ",
                     kMaxPathsPerSession, " range paths or ", kMaxStringsPerSession, " strings"));
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckStrings(const v1::Batch& batch) {
  for (int i = 0; i < batch.strings_size(); ++i) {
    const v1::StringDef& def = batch.strings(i);
    if (def.id() == 0) return Reject("strings", i, "id must be > 0");
    if (std::string p = TextProblem(def.value(), kMaxStringDefBytes, EmptyText::kAllowed);
        !p.empty()) {
      return Reject("strings", i, FieldProblem("value", p));
    }
    const size_t digest = SessionDefinitions::StringDigest(def.value());
    const size_t* existing = added_->FindString(def.id());
    if (existing == nullptr) existing = known_.FindString(def.id());
    if (existing == nullptr) {
      added_->AddString(def.id(), def.value());
    } else if (*existing != digest) {
      return Reject("strings", i,
                    absl::StrCat("redefines string ", def.id(), " with a different value"));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckPaths(const v1::Batch& batch) {
  for (int i = 0; i < batch.paths_size(); ++i) {
    const v1::RangePath& path = batch.paths(i);
    if (path.id() == 0) return Reject("paths", i, "id must be > 0 (0 is the root)");
    if (std::string p = TextProblem(path.name(), kMaxNameBytes, EmptyText::kRejected); !p.empty())
      return Reject("paths", i, FieldProblem("name", p));
    if (std::string p = TextProblem(path.domain(), kMaxNameBytes, EmptyText::kAllowed);
        !p.empty()) {
      return Reject("paths", i, FieldProblem("domain", p));
    }
    uint32_t parent_depth = 0;
    if (path.parent_id() != 0) {
      const PathDefinition* parent = FindPath(path.parent_id());
      if (parent == nullptr) {
        return Reject(
            "paths", i,
            absl::StrCat("parent_id ", path.parent_id(),
                         " is not defined (a parent must be defined before its children)"));
      }
      parent_depth = parent->depth;
    }
    if (parent_depth + 1 > kMaxNestingDepth) {
      return Reject(
          "paths", i,
          absl::StrCat("nesting depth ", parent_depth + 1, " exceeds ", kMaxNestingDepth));
    }
    const PathDefinition* existing = FindPath(path.id());
    if (existing == nullptr) {
      added_->AddPath(path.id(), path.parent_id(), parent_depth, path.domain(), path.name());
    } else if (existing->content_digest !=
               SessionDefinitions::PathDigest(path.parent_id(), path.domain(), path.name())) {
      return Reject("paths", i,
                    absl::StrCat("redefines path ", path.id(), " with different content"));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckRanges(const v1::Batch& batch) {
  for (int i = 0; i < batch.ranges_size(); ++i) {
    if (std::string p = RangeProblem(batch.ranges(i)); !p.empty()) return Reject("ranges", i, p);
  }
  return CheckInstancesUnique(batch);
}

absl::Status BatchValidator::CheckInstancesUnique(const v1::Batch& batch) const {
  // A sorted copy, neighbours compared: a few ns a range next to the SQLite row each costs, and
  // several times cheaper than a hash set at batch sizes (measured on the development VM).
  // Repeats across batches are the store's business (rank_store.h).
  if (batch.ranges_size() < 2) return absl::OkStatus();
  std::vector<uint64_t> ids;
  ids.reserve(static_cast<size_t>(batch.ranges_size()));
  for (const v1::RangeEvent& range : batch.ranges()) ids.push_back(range.instance_id());
  std::sort(ids.begin(), ids.end());
  const auto repeat = std::adjacent_find(ids.begin(), ids.end());
  if (repeat == ids.end()) return absl::OkStatus();
  int first = -1;  // the error path only: where the id came first and again
  for (int i = 0; i < batch.ranges_size(); ++i) {
    if (batch.ranges(i).instance_id() != *repeat) continue;
    if (first >= 0) {
      return Reject("ranges", i,
                    absl::StrCat("instance_id ", *repeat, " repeats ranges[", first,
                                 "] (each occurrence is sent once)"));
    }
    first = i;
  }
  return Reject("ranges", first, absl::StrCat("instance_id ", *repeat, " repeats"));  // not reached
}

std::string BatchValidator::RangeProblem(const v1::RangeEvent& range) const {
  if (range.path_id() == 0) return "path_id must be > 0";
  if (FindPath(range.path_id()) == nullptr) {
    return absl::StrCat("path_id ", range.path_id(), " is not defined");
  }
  if (range.instance_id() == 0) return "instance_id must be > 0";
  if (range.parent_instance_id() >= range.instance_id()) {
    return absl::StrCat("parent_instance_id ", range.parent_instance_id(),
                        " is not below instance_id ", range.instance_id(),
                        " (occurrences are numbered as they are pushed, a parent before its "
                        "children; 0 for none)");
  }
  if (!v1::RangeKind_IsValid(range.kind())) {
    return absl::StrCat("kind ", range.kind(), " is not a RangeKind");
  }
  if (std::string p = IntervalProblem(range.start_ns(), range.end_ns()); !p.empty()) return p;
  if (session_start_ns_ > 0 && range.start_ns() < session_start_ns_ - kSessionStartSlackNs) {
    return absl::StrCat("start_ns ", range.start_ns(), " is before the session's start_time_ns ",
                        session_start_ns_, " less ", kSessionStartSlackNs / 1'000'000'000,
                        " s of clock slack (a range cannot be older than its process)");
  }
  return "";
}

absl::Status BatchValidator::CheckKernels(const v1::Batch& batch) {
  // Consecutive kernels mostly share a range and a name: remember the last ids found.
  uint64_t last_path = 0;
  uint32_t last_name = 0;
  for (int i = 0; i < batch.kernels_size(); ++i) {
    const v1::KernelRecord& kernel = batch.kernels(i);
    if (kernel.path_id() != last_path) {
      if (FindPath(kernel.path_id()) == nullptr) {
        return Reject("kernels", i, absl::StrCat("path_id ", kernel.path_id(), " is not defined"));
      }
      last_path = kernel.path_id();
    }
    if (!v1::ActivityKind_IsValid(kernel.kind())) {
      return Reject("kernels", i, absl::StrCat("kind ", kernel.kind(), " is not an ActivityKind"));
    }
    if (kernel.name_id() == 0 && kernel.kind() == v1::ACTIVITY_KIND_KERNEL) {
      return Reject("kernels", i, "name_id must be > 0 for a kernel");
    }
    if (kernel.name_id() != 0 && kernel.name_id() != last_name) {
      if (!IsStringDefined(kernel.name_id())) {
        return Reject("kernels", i, absl::StrCat("name_id ", kernel.name_id(), " is not defined"));
      }
      last_name = kernel.name_id();
    }
    if (std::string p = IntervalProblem(kernel.start_ns(), kernel.end_ns()); !p.empty())
      return Reject("kernels", i, p);
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckKernelFlops(const v1::Batch& batch) {
  // Correlation ids are not checked for repeats: the kernels of one CUDA graph launch share the
  // launch's id, and each has counters of its own.
  for (int i = 0; i < batch.kernel_flops_size(); ++i) {
    const v1::KernelFlops& counted = batch.kernel_flops(i);
    if (FindPath(counted.path_id()) == nullptr) {
      return Reject("kernel_flops", i,
                    absl::StrCat("path_id ", counted.path_id(), " is not defined"));
    }
    if (FindPath(counted.phase_path_id()) == nullptr) {
      return Reject("kernel_flops", i,
                    absl::StrCat("phase_path_id ", counted.phase_path_id(), " is not defined"));
    }
    if (counted.name_id() != 0 && !IsStringDefined(counted.name_id())) {
      return Reject("kernel_flops", i,
                    absl::StrCat("name_id ", counted.name_id(), " is not defined"));
    }
    if (counted.counted_step() < -1 || counted.counted_step() > kMaxStepOrdinal) {
      return Reject("kernel_flops", i,
                    absl::StrCat("counted_step ", counted.counted_step(), " is outside [-1, ",
                                 kMaxStepOrdinal, "]"));
    }
    if (!counted.has_flops()) return Reject("kernel_flops", i, "flops is missing");
    if (absl::Status s = CheckFlops(counted.flops()); !s.ok()) {
      return Reject("kernel_flops", i, absl::StrCat("flops: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckFlops(const v1::FlopCounters& flops) const {
  if (!IsCount(flops.fp64()) || !IsCount(flops.fp32()) || !IsCount(flops.fp16())) {
    return absl::InvalidArgumentError("counts must be finite and >= 0");
  }
  if (flops.tensor_size() > kMaxTensorSourcesPerKernel ||
      flops.raw_size() > kMaxRawCountersPerKernel) {
    return absl::InvalidArgumentError(
        absl::StrCat("too many entries (at most ", kMaxTensorSourcesPerKernel,
                     " tensor sources and ", kMaxRawCountersPerKernel, " raw counters)"));
  }
  for (const v1::FlopCounters::Tensor& tensor : flops.tensor()) {
    if (std::string p = TextProblem(tensor.source(), kMaxNameBytes, EmptyText::kRejected);
        !p.empty()) {
      return absl::InvalidArgumentError(FieldProblem("tensor source", p));
    }
    if (!IsCount(tensor.flops())) {
      return absl::InvalidArgumentError("tensor flops must be finite and >= 0");
    }
  }
  for (const v1::FlopCounters::Raw& raw : flops.raw()) {
    if (std::string p = TextProblem(raw.metric(), kMaxNameBytes, EmptyText::kRejected);
        !p.empty()) {
      return absl::InvalidArgumentError(FieldProblem("raw metric", p));
    }
    if (!std::isfinite(raw.value())) {
      return absl::InvalidArgumentError("raw counter values must be finite");
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckWindows(const v1::Batch& batch) const {
  for (int i = 0; i < batch.windows_size(); ++i) {
    if (std::string p = WindowProblem(batch.windows(i)); !p.empty()) return Reject("windows", i, p);
  }
  return absl::OkStatus();
}

std::string BatchValidator::WindowProblem(const v1::CounterWindowRecord& window) const {
  const int64_t first = window.first_step();
  const int64_t last = window.last_step();
  const bool no_steps = first == -1 && last == -1;
  if (!no_steps) {
    if (first < 0 || last < first || last > kMaxStepOrdinal) {
      return absl::StrCat("steps ", first, "-", last,
                          " are not a step range (0 <= first <= last, or both -1)");
    }
    if (last - first >= kMaxWindowSteps) {
      return absl::StrCat("steps ", first, "-", last, " span more than ", kMaxWindowSteps,
                          " steps");
    }
  }
  if (std::string p = IntervalProblem(window.start_ns(), window.end_ns()); !p.empty()) return p;
  const std::pair<const char*, const std::string*> texts[] = {{"trigger", &window.trigger()},
                                                              {"metric_set", &window.metric_set()},
                                                              {"chip", &window.chip()},
                                                              {"status", &window.status()}};
  for (const auto& [field, text] : texts) {
    if (std::string p = TextProblem(*text, kMaxNameBytes, EmptyText::kAllowed); !p.empty())
      return FieldProblem(field, p);
  }
  if (window.passes() > kMaxReplayPasses) {
    return absl::StrCat("passes ", window.passes(), " exceeds ", kMaxReplayPasses);
  }
  if (window.kernels_counted() >= kMaxWindowCount || window.ranges_unmatched() >= kMaxWindowCount) {
    return absl::StrCat("kernels_counted ", window.kernels_counted(), " or ranges_unmatched ",
                        window.ranges_unmatched(), " is not below ", kMaxWindowCount);
  }
  if (window.comm_kernels_excluded() >= kMaxWindowCount) {
    return absl::StrCat("comm_kernels_excluded ", window.comm_kernels_excluded(), " is not below ",
                        kMaxWindowCount);
  }
  return "";
}

absl::Status BatchValidator::CheckMetadata(const v1::Batch& batch) const {
  for (int i = 0; i < batch.metadata_size(); ++i) {
    const v1::Metadata& entry = batch.metadata(i);
    if (std::string p = TextProblem(entry.key(), kMaxMetadataKeyBytes, EmptyText::kRejected);
        !p.empty()) {
      return Reject("metadata", i, FieldProblem("key", p));
    }
    if (std::string p = TextProblem(entry.value(), kMaxMetadataValueBytes, EmptyText::kAllowed);
        !p.empty()) {
      return Reject("metadata", i, FieldProblem("value", p));
    }
    // 0 means "no time known" (facts the injector learned itself, like device names).
    if (entry.time_ns() != 0) {
      if (std::string p = TimestampProblem("time_ns", entry.time_ns()); !p.empty())
        return Reject("metadata", i, p);
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckLosses(const v1::Batch& batch) const {
  for (int i = 0; i < batch.losses_size(); ++i) {
    if (!v1::LossCause_IsValid(batch.losses(i).cause())) {
      return Reject("losses", i,
                    absl::StrCat("cause ", batch.losses(i).cause(), " is not a LossCause"));
    }
    // The daemon's own counts of a stream's end: a producer cannot vouch for them.
    if (batch.losses(i).cause() == v1::LOSS_CAUSE_NOT_ARRIVED ||
        batch.losses(i).cause() == v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL ||
        batch.losses(i).cause() == v1::LOSS_CAUSE_KILLED) {
      return Reject("losses", i,
                    absl::StrCat("cause ", batch.losses(i).cause(),
                                 " is counted by the daemon only, never sent by a producer"));
    }
    // A node daemon's count of what its outbox dropped: a producer cannot vouch for it.
    if (batch.losses(i).cause() == v1::LOSS_CAUSE_FORWARD_DROPPED &&
        origin_ != BatchOrigin::kNodeDaemon) {
      return Reject("losses", i,
                    absl::StrCat("cause ", batch.losses(i).cause(),
                                 " is counted by a node daemon only, never sent by a producer"));
    }
    if (batch.losses(i).records() >= kMaxLossRecords) {
      return Reject(
          "losses", i,
          absl::StrCat("records ", batch.losses(i).records(), " is not below ", kMaxLossRecords));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchValidator::CheckOpenRanges(const v1::Batch& batch) const {
  if (!batch.has_open_ranges()) return absl::OkStatus();
  const v1::OpenRanges& open = batch.open_ranges();
  if (std::string p = TimestampProblem("time_ns", open.time_ns()); !p.empty()) {
    return Reject("open_ranges", 0, p);
  }
  if (open.threads_size() > kMaxOpenRangeThreads) {
    return Reject("open_ranges", 0,
                  absl::StrCat("holds ", open.threads_size(), " threads (at most ",
                               kMaxOpenRangeThreads, ")"));
  }
  for (int i = 0; i < open.threads_size(); ++i) {
    const v1::ThreadOpenRanges& thread = open.threads(i);
    std::string p =
        OpenStackProblem("modules", thread.modules(), thread.module_depth(), open.time_ns());
    if (p.empty()) {
      p = OpenStackProblem("phases", thread.phases(), thread.phase_depth(), open.time_ns());
    }
    if (!p.empty()) return Reject("open_ranges", i, p);
  }
  return absl::OkStatus();
}

std::string BatchValidator::OpenStackProblem(
    absl::string_view name, const google::protobuf::RepeatedPtrField<v1::OpenRange>& ranges,
    uint32_t depth, int64_t time_ns) const {
  if (ranges.size() > kMaxOpenRangesPerStack) {
    return absl::StrCat(name, ": ", ranges.size(), " ranges (at most ", kMaxOpenRangesPerStack,
                        ")");
  }
  if (depth < static_cast<uint32_t>(ranges.size()) || depth > kMaxNestingDepth) {
    return absl::StrCat(name, ": depth ", depth, " is not within [", ranges.size(), ", ",
                        kMaxNestingDepth, "]");
  }
  for (int j = 0; j < ranges.size(); ++j) {
    const v1::OpenRange& range = ranges[j];
    if (range.path_id() == 0 || FindPath(range.path_id()) == nullptr) {
      return absl::StrCat(name, "[", j, "]: path_id ", range.path_id(), " is not defined");
    }
    if (std::string p = TimestampProblem("start_ns", range.start_ns()); !p.empty()) {
      return absl::StrCat(name, "[", j, "]: ", p);
    }
    if (range.start_ns() > time_ns) {
      return absl::StrCat(name, "[", j, "]: start_ns ", range.start_ns(),
                          " is after the snapshot's time_ns ", time_ns);
    }
  }
  return "";
}

const PathDefinition* BatchValidator::FindPath(uint64_t id) const {
  if (id == 0) {
    static constexpr PathDefinition kRoot{};
    return &kRoot;
  }
  const PathDefinition* found = added_->FindPath(id);
  return found != nullptr ? found : known_.FindPath(id);
}

bool BatchValidator::IsStringDefined(uint32_t id) const {
  return added_->FindString(id) != nullptr || known_.FindString(id) != nullptr;
}

std::string BatchValidator::IntervalProblem(int64_t start_ns, int64_t end_ns) const {
  if (std::string p = TimestampProblem("start_ns", start_ns); !p.empty()) return p;
  if (std::string p = TimestampProblem("end_ns", end_ns); !p.empty()) return p;
  if (end_ns < start_ns) return absl::StrCat("end_ns ", end_ns, " is before start_ns ", start_ns);
  return "";
}

std::string BatchValidator::TimestampProblem(absl::string_view field, int64_t ns) const {
  if (ns >= kEarliestTimestampNs && ns <= latest_ns_) return "";
  return absl::StrCat(field, " ", ns,
                      " is outside [2000-01-01, now + 1 day] (Unix-epoch nanoseconds expected)");
}

absl::Status BatchValidator::Reject(absl::string_view record, int index,
                                    absl::string_view problem) const {
  return Rejection(record,
                   absl::StrCat("batch seq ", seq_, ": ", record, "[", index, "]: ", problem));
}

}  // namespace flopscope::daemon
