#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "injector/ranges/open_stacks.h"
#include "injector/ranges/path_table.h"
#include "injector/records/string_table.h"
#include "injector/records/thread_buffer.h"
#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

// The open ranges of a process at one moment (flopscope.v1.OpenRanges), CLOCK_REALTIME ns.
struct OpenRangesContent {
  int64_t time_ns = 0;
  std::vector<ThreadOpenStacks> threads;  // none: nothing open
};

// Everything one export cycle sends: definitions first, then records.
struct ExportContent {
  std::vector<StringDefinition> strings;
  std::vector<PathDefinition> paths;
  RecordSet records;
  std::vector<fs_loss> losses;  // cumulative; repeated in every batch
  bool final = false;
  // Sent in the cycle's last batch, after every definition its path ids may need.
  std::optional<OpenRangesContent> open_ranges;
};

// Cuts one cycle's content into fs_batch views of bounded size: at most max_items entries and
// about max_bytes encoded. Definitions come before the records that may use them (strings, then
// paths, then metadata, ranges, kernels, kernel FLOPs, counter windows), so slicing in order
// never sends a record ahead of its definition. The views point into the assembler and stay
// valid until the next Reset.
class BatchAssembler {
 public:
  static constexpr size_t kDefaultMaxItems = 16384;
  static constexpr size_t kDefaultMaxBytes = 2u << 20;

  explicit BatchAssembler(size_t max_items = kDefaultMaxItems, size_t max_bytes = kDefaultMaxBytes)
      : max_items_(max_items), max_bytes_(max_bytes) {}

  // `send_empty`: produce one batch even when there is nothing in it (the final batch, or
  // losses that changed).
  void Reset(ExportContent content, bool send_empty);
  // Fills *batch with the next slice and *records with its record count; false when done.
  bool Next(fs_batch* batch, uint64_t* records);

 private:
  // Takes items from a list while the slice has room; returns how many.
  template <typename T, typename SizeFn>
  size_t TakeItems(const std::vector<T>& items, size_t* cursor, size_t* items_left,
                   size_t* bytes_left, SizeFn item_bytes);
  void ViewCounterRecords();
  void ViewOpenRanges();
  bool AllTaken() const;

  const size_t max_items_;
  const size_t max_bytes_;
  ExportContent content_;
  std::vector<fs_string_def> string_views_;
  std::vector<fs_range_path> path_views_;
  std::vector<fs_metadata> metadata_views_;
  std::vector<fs_kernel_flops> flops_views_;
  std::vector<fs_tensor_flops> tensor_views_;  // every record's, back to back
  std::vector<fs_raw_counter> raw_views_;
  std::vector<fs_counter_window> window_views_;
  std::vector<fs_thread_open_ranges> open_thread_views_;
  std::vector<fs_open_range> open_range_views_;  // every thread's, back to back
  size_t next_string_ = 0, next_path_ = 0, next_metadata_ = 0, next_range_ = 0, next_kernel_ = 0,
         next_flops_ = 0, next_window_ = 0;
  bool emitted_any_ = false;
  bool send_empty_ = false;
};

}  // namespace flopscope::injector
