#include "importer/range_nester.h"

#include <algorithm>
#include <numeric>

#include "importer/range_role.h"

namespace flopscope::importer {
namespace {

// Where a range goes once classified.
struct Placement {
  bool flopscope = false;    // the steps-and-phases stack, else the module stack
  bool pushed = true;        // start/end ranges are never parents
  absl::string_view name;    // the path's name
  int64_t step_number = -1;  // >= 0 for a step
};

}  // namespace

void RangeNester::Run() {
  for (const RawRange& range : recording_.ranges) {
    if (range.origin != RangeOrigin::kAnnotation) continue;
    if (range.external_id != 0) cpu_external_ids_.insert(range.external_id);
    cpu_annotation_names_.insert(range.name);
  }
  std::vector<Open> modules;
  std::vector<Open> flopscope;
  uint64_t thread = 0;
  bool first = true;
  for (const size_t index : SortedRanges()) {
    const RawRange& range = recording_.ranges[index];
    if (first || range.thread != thread) {
      first = false;
      thread = range.thread;
      modules.clear();
      flopscope.clear();
    }
    if (range.origin == RangeOrigin::kGpuAnnotation && IsGpuDuplicate(range)) {
      ++gpu_duplicates_;
      continue;
    }
    Place(range, &modules, &flopscope);
  }
}

std::vector<size_t> RangeNester::SortedRanges() const {
  std::vector<size_t> order(recording_.ranges.size());
  std::iota(order.begin(), order.end(), 0);
  const std::vector<RawRange>& ranges = recording_.ranges;
  // Per thread by start; of two that start together the longer is the outer one; file order
  // breaks the remaining ties (a parent is written before its children).
  std::stable_sort(order.begin(), order.end(), [&ranges](size_t a, size_t b) {
    const RawRange& ra = ranges[a];
    const RawRange& rb = ranges[b];
    if (ra.thread != rb.thread) return ra.thread < rb.thread;
    if (ra.start_ns != rb.start_ns) return ra.start_ns < rb.start_ns;
    return ra.end_ns > rb.end_ns;
  });
  return order;
}

bool RangeNester::IsGpuDuplicate(const RawRange& range) const {
  if (range.external_id != 0) return cpu_external_ids_.contains(range.external_id);
  return cpu_annotation_names_.contains(range.name);
}

void RangeNester::Place(const RawRange& range, std::vector<Open>* modules,
                        std::vector<Open>* flopscope) {
  // Close what ended before this range starts (touching counts as ended, unless both start
  // together: then the longer one, sorted first, encloses this one).
  for (std::vector<Open>* stack : {modules, flopscope}) {
    while (!stack->empty() && stack->back().end_ns <= range.start_ns &&
           stack->back().start_ns != range.start_ns) {
      stack->pop_back();
    }
  }
  const absl::string_view name = recording_.strings.Get(range.name);
  const absl::string_view domain = recording_.strings.Get(range.domain);
  Placement placement;
  placement.name = name;
  placement.pushed = range.origin != RangeOrigin::kStartEnd;
  if (range.origin == RangeOrigin::kAnnotation || range.origin == RangeOrigin::kStartEnd) {
    const AnnotationRole role = ClassifyAnnotation(name);
    if (domain == kFlopscopeDomain) {
      placement.flopscope = true;  // a framework's own steps and phases: names kept
      if (role.role == RangeRole::kStep) placement.name = role.flopscope_name;
      placement.step_number = role.step_number;
    } else if (role.role == RangeRole::kStep ||
               (role.role == RangeRole::kPhase && !PhaseIsOpen(role.flopscope_name, *flopscope))) {
      placement.flopscope = true;
      placement.name = role.flopscope_name;
      placement.step_number = role.step_number;
    }
  }
  std::vector<Open>* stack = placement.flopscope ? flopscope : modules;
  if (stack->size() >= kMaxDepth) {
    ++overflowed_;
    return;
  }
  const Open* parent = stack->empty() ? nullptr : &stack->back();
  const absl::string_view path_domain =
      placement.flopscope ? absl::string_view(kFlopscopeDomain) : domain;
  const uint64_t path_id =
      paths_.Intern(parent != nullptr ? parent->path_id : 0, path_domain, placement.name);
  const uint64_t instance_id = next_instance_++;
  ranges_.push_back({path_id, instance_id, parent != nullptr ? parent->instance_id : 0,
                     range.thread, range.start_ns, range.end_ns,
                     placement.pushed ? v1::RANGE_KIND_PUSH_POP : v1::RANGE_KIND_START_END});
  if (!placement.pushed) return;
  stack->push_back({range.start_ns, range.end_ns, path_id, instance_id,
                    placement.flopscope ? placement.name : absl::string_view()});
  if (!placement.flopscope) {
    modules_.Add(range.thread, range.start_ns, range.end_ns);
    module_targets_.push_back({path_id, instance_id});
    return;
  }
  flopscope_ranges_.Add(range.thread, range.start_ns, range.end_ns);
  flopscope_paths_.push_back(path_id);
  if (placement.step_number >= 0) {
    steps_.Add(range.thread, range.start_ns, range.end_ns);
    step_numbers_.push_back(placement.step_number);
  }
}

bool RangeNester::PhaseIsOpen(absl::string_view phase, const std::vector<Open>& stack) {
  return std::any_of(stack.begin(), stack.end(),
                     [phase](const Open& open) { return open.phase == phase; });
}

}  // namespace flopscope::importer
