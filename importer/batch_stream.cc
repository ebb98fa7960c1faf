#include "importer/batch_stream.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace flopscope::importer {

BatchStream::BatchStream(const ImportPlan& plan) : plan_(plan) {
  absl::flat_hash_set<uint32_t> used;
  for (const GpuActivity& activity : plan.recording.activities) {
    if (activity.kind == v1::ACTIVITY_KIND_KERNEL && activity.name != 0) used.insert(activity.name);
  }
  kernel_names_.assign(used.begin(), used.end());
  std::sort(kernel_names_.begin(), kernel_names_.end());
  for (const auto& [index, flops] : plan.flops) counted_.push_back(index);
  std::sort(counted_.begin(), counted_.end());
}

size_t BatchStream::PartSize(Part part) const {
  switch (part) {
    case Part::kStrings:
      return kernel_names_.size();
    case Part::kPaths:
      return plan_.paths.size();
    case Part::kRanges:
      return plan_.ranges.size();
    case Part::kActivities:
      return plan_.recording.activities.size();
    case Part::kCounted:
      return counted_.size();
    case Part::kMetadata:
      return plan_.metadata.size();
    case Part::kLosses:
      return plan_.losses.size();
    case Part::kDone:
      break;
  }
  return 0;
}

bool BatchStream::Next(v1::Batch* batch) {
  batch->Clear();
  if (part_ == Part::kDone) return false;
  batch->set_seq(++seq_);
  size_t records = 0;
  size_t bytes = 0;
  while (part_ != Part::kDone && records < kMaxRecords && bytes < kMaxBytes) {
    if (index_ >= PartSize(part_)) {
      part_ = static_cast<Part>(static_cast<int>(part_) + 1);
      index_ = 0;
      continue;
    }
    bytes += AppendOne(batch);
    ++index_;
    ++records;
  }
  // Skip past empty trailing parts, so the batch that empties the plan is the final one.
  while (part_ != Part::kDone && index_ >= PartSize(part_)) {
    part_ = static_cast<Part>(static_cast<int>(part_) + 1);
    index_ = 0;
  }
  batch->set_final(part_ == Part::kDone);
  return true;
}

size_t BatchStream::AppendOne(v1::Batch* batch) {
  const int64_t offset = plan_.time_offset_ns;
  switch (part_) {
    case Part::kStrings: {
      const uint32_t id = kernel_names_[index_];
      v1::StringDef* def = batch->add_strings();
      def->set_id(id);
      def->set_value(plan_.recording.strings.Get(id));
      return def->value().size() + 8;
    }
    case Part::kPaths: {
      const v1::RangePath& path = plan_.paths[index_];
      *batch->add_paths() = path;
      return path.name().size() + path.domain().size() + 24;
    }
    case Part::kRanges: {
      const PlannedRange& planned = plan_.ranges[index_];
      v1::RangeEvent* range = batch->add_ranges();
      range->set_path_id(planned.path_id);
      range->set_instance_id(planned.instance_id);
      range->set_parent_instance_id(planned.parent_instance_id);
      range->set_thread_id(planned.thread_id);
      range->set_start_ns(planned.start_ns + offset);
      range->set_end_ns(planned.end_ns + offset);
      range->set_kind(planned.kind);
      return 56;
    }
    case Part::kActivities:
      AppendKernel(index_, batch);
      return 96;
    case Part::kCounted:
      AppendCounted(counted_[index_], batch);
      return 96 + batch->kernel_flops(batch->kernel_flops_size() - 1).flops().raw_size() * 64;
    case Part::kMetadata: {
      v1::Metadata* entry = batch->add_metadata();
      *entry = plan_.metadata[index_];
      return entry->key().size() + entry->value().size() + 16;
    }
    case Part::kLosses:
      *batch->add_losses() = plan_.losses[index_];
      return 8;
    case Part::kDone:
      break;
  }
  return 0;
}

void BatchStream::AppendKernel(size_t index, v1::Batch* batch) const {
  const GpuActivity& activity = plan_.recording.activities[index];
  const Attribution& attribution = plan_.attributions[index];
  v1::KernelRecord* kernel = batch->add_kernels();
  kernel->set_correlation_id(activity.correlation_id);
  kernel->set_path_id(attribution.path_id);
  kernel->set_range_instance_id(attribution.instance_id);
  kernel->set_name_id(activity.kind == v1::ACTIVITY_KIND_KERNEL ? activity.name : 0);
  kernel->set_device_id(activity.device);
  kernel->set_context_id(activity.context);
  kernel->set_stream_id(activity.stream);
  kernel->set_start_ns(activity.start_ns + plan_.time_offset_ns);
  kernel->set_end_ns(activity.end_ns + plan_.time_offset_ns);
  kernel->set_grid_x(activity.grid[0]);
  kernel->set_grid_y(activity.grid[1]);
  kernel->set_grid_z(activity.grid[2]);
  kernel->set_block_x(activity.block[0]);
  kernel->set_block_y(activity.block[1]);
  kernel->set_block_z(activity.block[2]);
  kernel->set_kind(activity.kind);
  kernel->set_bytes(activity.bytes);
  kernel->set_graph_id(activity.graph_id);
  kernel->set_graph_node_id(activity.graph_node_id);
}

void BatchStream::AppendCounted(size_t index, v1::Batch* batch) const {
  const GpuActivity& activity = plan_.recording.activities[index];
  const Attribution& attribution = plan_.attributions[index];
  v1::KernelFlops* counted = batch->add_kernel_flops();
  counted->set_correlation_id(activity.correlation_id);
  counted->set_path_id(attribution.path_id);
  counted->set_range_instance_id(attribution.instance_id);
  counted->set_name_id(activity.kind == v1::ACTIVITY_KIND_KERNEL ? activity.name : 0);
  counted->set_device_id(activity.device);
  counted->set_counted_step(-1);
  if (const auto context = plan_.counted_context.find(index);
      context != plan_.counted_context.end()) {
    counted->set_counted_step(context->second.step);
    counted->set_phase_path_id(context->second.phase_path_id);
  }
  *counted->mutable_flops() = plan_.flops.at(index);
}

}  // namespace flopscope::importer
