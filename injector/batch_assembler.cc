#include "injector/batch_assembler.h"

#include <algorithm>

namespace flopscope::injector {
namespace {

// Rough encoded sizes (protobuf tags, varints) for the byte bound; generous on purpose.
constexpr size_t kRangeBytes = 64;
constexpr size_t kKernelBytes = 128;
constexpr size_t kDefinitionOverhead = 32;

fs_str View(const std::string& text) {
  return fs_str{text.data(), static_cast<uint32_t>(text.size())};
}

}  // namespace

void BatchAssembler::Reset(ExportContent content, bool send_empty) {
  content_ = std::move(content);
  send_empty_ = send_empty;
  emitted_any_ = false;
  next_string_ = next_path_ = next_metadata_ = next_range_ = next_kernel_ = 0;
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
  const bool anything_left =
      next_string_ < string_views_.size() || next_path_ < path_views_.size() ||
      next_metadata_ < metadata_views_.size() || next_range_ < content_.records.ranges.size() ||
      next_kernel_ < content_.records.kernels.size();
  if (!anything_left && (emitted_any_ || !send_empty_)) return false;

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

  batch->losses = content_.losses.data();
  batch->num_losses = static_cast<uint32_t>(content_.losses.size());
  const bool last = next_string_ == string_views_.size() && next_path_ == path_views_.size() &&
                    next_metadata_ == metadata_views_.size() &&
                    next_range_ == content_.records.ranges.size() &&
                    next_kernel_ == content_.records.kernels.size();
  batch->final = (last && content_.final) ? 1 : 0;
  *records = uint64_t{batch->num_metadata} + batch->num_ranges + batch->num_kernels;
  emitted_any_ = true;
  return true;
}

}  // namespace flopscope::injector
