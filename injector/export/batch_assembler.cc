#include "injector/export/batch_assembler.h"

#include <algorithm>

#include "injector/export/abi_text.h"

namespace flopscope::injector {
namespace {

// Rough encoded sizes (protobuf tags, varints) for the byte bound; generous on purpose.
constexpr size_t kRangeBytes = 64;
constexpr size_t kKernelBytes = 128;
constexpr size_t kDefinitionOverhead = 32;
constexpr size_t kFlopsBytes = 96;         // plus its tensor and raw entries
constexpr size_t kCounterEntryBytes = 24;  // plus the name
constexpr size_t kWindowBytes = 96;        // plus its strings

size_t FlopsBytes(const fs_kernel_flops& k) {
  size_t bytes = kFlopsBytes;
  for (uint32_t i = 0; i < k.flops.num_tensor; ++i) {
    bytes += kCounterEntryBytes + k.flops.tensor[i].source.size;
  }
  for (uint32_t i = 0; i < k.flops.num_raw; ++i) {
    bytes += kCounterEntryBytes + k.flops.raw[i].metric.size;
  }
  return bytes;
}

}  // namespace

void BatchAssembler::Reset(ExportContent content, bool send_empty) {
  content_ = std::move(content);
  send_empty_ = send_empty;
  emitted_any_ = false;
  next_string_ = next_path_ = next_metadata_ = next_range_ = next_kernel_ = next_flops_ =
      next_window_ = 0;
  string_views_.clear();
  for (const StringDefinition& s : content_.strings) {
    string_views_.push_back(fs_string_def{s.id, View(s.value)});
  }
  path_views_.clear();
  for (const PathDefinition& p : content_.paths) {
    path_views_.push_back(fs_range_path{p.id, p.parent_id, View(p.name), View(p.domain->name)});
  }
  metadata_views_.clear();
  for (const MetadataRecord& m : content_.records.metadata) {
    metadata_views_.push_back(fs_metadata{View(m.key), View(m.value), m.time_ns});
  }
  ViewCounterRecords();
  ViewOpenRanges();
}

void BatchAssembler::ViewOpenRanges() {
  open_thread_views_.clear();
  open_range_views_.clear();
  if (!content_.open_ranges) return;
  // The entry array is filled completely before any pointer into it is taken.
  for (const ThreadOpenStacks& thread : content_.open_ranges->threads) {
    for (const OpenRangeEntry& e : thread.modules) {
      open_range_views_.push_back(fs_open_range{e.path_id, e.start_ns});
    }
    for (const OpenRangeEntry& e : thread.phases) {
      open_range_views_.push_back(fs_open_range{e.path_id, e.start_ns});
    }
  }
  size_t at = 0;
  for (const ThreadOpenStacks& thread : content_.open_ranges->threads) {
    fs_thread_open_ranges view{};
    view.thread_id = thread.thread_id;
    view.modules = open_range_views_.data() + at;
    view.num_modules = static_cast<uint32_t>(thread.modules.size());
    view.module_depth = thread.module_depth;
    at += thread.modules.size();
    view.phases = open_range_views_.data() + at;
    view.num_phases = static_cast<uint32_t>(thread.phases.size());
    view.phase_depth = thread.phase_depth;
    at += thread.phases.size();
    open_thread_views_.push_back(view);
  }
}

void BatchAssembler::ViewCounterRecords() {
  const std::vector<KernelFlopsRecord>& flops = content_.records.kernel_flops;
  flops_views_.clear();
  tensor_views_.clear();
  raw_views_.clear();
  // The entry arrays are filled completely before any pointer into them is taken.
  for (const KernelFlopsRecord& k : flops) {
    for (const auto& [source, value] : k.tensor) {
      tensor_views_.push_back(fs_tensor_flops{View(source), value});
    }
    for (const auto& [metric, value] : k.raw)
      raw_views_.push_back(fs_raw_counter{View(metric), value});
  }
  size_t tensor_at = 0, raw_at = 0;
  for (const KernelFlopsRecord& k : flops) {
    fs_kernel_flops view{};
    view.correlation_id = k.correlation_id;
    view.path_id = k.path_id;
    view.range_instance_id = k.range_instance_id;
    view.name_id = k.name_id;
    view.device_id = k.device_id;
    view.phase_path_id = k.phase_path_id;
    view.counted_step = k.counted_step;
    view.flops = fs_flop_counters{k.fp64,
                                  k.fp32,
                                  k.fp16,
                                  tensor_views_.data() + tensor_at,
                                  static_cast<uint32_t>(k.tensor.size()),
                                  raw_views_.data() + raw_at,
                                  static_cast<uint32_t>(k.raw.size())};
    tensor_at += k.tensor.size();
    raw_at += k.raw.size();
    flops_views_.push_back(view);
  }
  window_views_.clear();
  for (const CounterWindowRecord& w : content_.records.windows) {
    window_views_.push_back(fs_counter_window{w.first_step, w.last_step, View(w.trigger),
                                              View(w.metric_set), View(w.chip), View(w.status),
                                              w.passes, w.kernels_counted, w.ranges_unmatched,
                                              w.start_ns, w.end_ns, w.comm_kernels_excluded});
  }
}

bool BatchAssembler::AllTaken() const {
  return next_string_ == string_views_.size() && next_path_ == path_views_.size() &&
         next_metadata_ == metadata_views_.size() &&
         next_range_ == content_.records.ranges.size() &&
         next_kernel_ == content_.records.kernels.size() && next_flops_ == flops_views_.size() &&
         next_window_ == window_views_.size();
}

template <typename T, typename SizeFn>
size_t BatchAssembler::TakeItems(const std::vector<T>& items, size_t* cursor, size_t* items_left,
                                 size_t* bytes_left, SizeFn item_bytes) {
  const size_t first = *cursor;
  while (*cursor < items.size() && *items_left > 0) {
    const size_t bytes = item_bytes(items[*cursor]);
    // A single oversized item still goes alone in its own batch.
    const bool slice_empty = *items_left == max_items_;
    if (bytes > *bytes_left && !slice_empty) {
      *items_left = 0;  // close this slice
      break;
    }
    *bytes_left -= std::min(bytes, *bytes_left);
    --*items_left;
    ++*cursor;
  }
  return *cursor - first;
}

bool BatchAssembler::Next(fs_batch* batch, uint64_t* records) {
  if (AllTaken() && (emitted_any_ || !send_empty_)) return false;

  *batch = fs_batch{};
  size_t items_left = max_items_;
  size_t bytes_left = max_bytes_;
  const size_t string_start = next_string_;
  batch->num_strings = static_cast<uint32_t>(
      TakeItems(string_views_, &next_string_, &items_left, &bytes_left,
                [](const fs_string_def& s) { return kDefinitionOverhead + s.value.size; }));
  batch->strings = string_views_.data() + string_start;
  const size_t path_start = next_path_;
  batch->num_paths = static_cast<uint32_t>(TakeItems(
      path_views_, &next_path_, &items_left, &bytes_left,
      [](const fs_range_path& p) { return kDefinitionOverhead + p.name.size + p.domain.size; }));
  batch->paths = path_views_.data() + path_start;
  const size_t metadata_start = next_metadata_;
  batch->num_metadata = static_cast<uint32_t>(TakeItems(
      metadata_views_, &next_metadata_, &items_left, &bytes_left,
      [](const fs_metadata& m) { return kDefinitionOverhead + m.key.size + m.value.size; }));
  batch->metadata = metadata_views_.data() + metadata_start;
  const size_t range_start = next_range_;
  batch->num_ranges = static_cast<uint32_t>(
      TakeItems(content_.records.ranges, &next_range_, &items_left, &bytes_left,
                [](const fs_range_event&) { return kRangeBytes; }));
  batch->ranges = content_.records.ranges.data() + range_start;
  const size_t kernel_start = next_kernel_;
  batch->num_kernels =
      static_cast<uint32_t>(TakeItems(content_.records.kernels, &next_kernel_, &items_left,
                                      &bytes_left, [](const fs_kernel&) { return kKernelBytes; }));
  batch->kernels = content_.records.kernels.data() + kernel_start;
  const size_t flops_start = next_flops_;
  batch->num_kernel_flops = static_cast<uint32_t>(
      TakeItems(flops_views_, &next_flops_, &items_left, &bytes_left, FlopsBytes));
  batch->kernel_flops = flops_views_.data() + flops_start;
  const size_t window_start = next_window_;
  batch->num_windows = static_cast<uint32_t>(TakeItems(
      window_views_, &next_window_, &items_left, &bytes_left, [](const fs_counter_window& w) {
        return kWindowBytes + w.trigger.size + w.chip.size + w.status.size;
      }));
  batch->windows = window_views_.data() + window_start;

  batch->losses = content_.losses.data();
  batch->num_losses = static_cast<uint32_t>(content_.losses.size());
  batch->final = (AllTaken() && content_.final) ? 1 : 0;
  if (AllTaken() && content_.open_ranges) {
    batch->has_open_ranges = 1;
    batch->open_ranges_time_ns = content_.open_ranges->time_ns;
    batch->open_threads = open_thread_views_.data();
    batch->num_open_threads = static_cast<uint32_t>(open_thread_views_.size());
  }
  *records = uint64_t{batch->num_metadata} + batch->num_ranges + batch->num_kernels +
             batch->num_kernel_flops + batch->num_windows;
  emitted_any_ = true;
  return true;
}

}  // namespace flopscope::injector
