#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flopscope/v1/records.pb.h"
#include "importer/import_plan.h"

namespace flopscope::importer {

// Cuts an ImportPlan into the batches the daemon commits one by one, in an order where every
// definition precedes its use: kernel-name strings, range paths (parents first), range events,
// GPU activities, counted FLOPs (KernelFlops, by activity index), then metadata and losses; the
// last batch is marked final. A batch holds at
// most kMaxRecords records and about kMaxBytes of encoded data (kernel names can be long), and
// seq numbers run 1, 2, 3, ... The same plan always gives the same batches, which is what lets
// a re-import skip what the daemon already committed. Timestamps get the plan's time offset.
class BatchStream {
 public:
  static constexpr size_t kMaxRecords = 10000;
  static constexpr size_t kMaxBytes = size_t{4} << 20;

  explicit BatchStream(const ImportPlan& plan);

  // Fills *batch with the next one; false once every batch was produced.
  bool Next(v1::Batch* batch);

 private:
  enum class Part : uint8_t {
    kStrings,
    kPaths,
    kRanges,
    kActivities,
    kCounted,
    kMetadata,
    kLosses,
    kDone
  };

  // Appends the record at the cursor; returns its approximate encoded size.
  size_t AppendOne(v1::Batch* batch);
  size_t PartSize(Part part) const;
  void AppendKernel(size_t index, v1::Batch* batch) const;
  void AppendCounted(size_t index, v1::Batch* batch) const;

  const ImportPlan& plan_;
  std::vector<uint32_t> kernel_names_;  // StringPool ids used by kernels, ascending
  std::vector<size_t> counted_;         // activities with counted FLOPs, ascending
  Part part_ = Part::kStrings;
  size_t index_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace flopscope::importer
