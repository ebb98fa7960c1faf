#pragma once

#include <atomic>
#include <set>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/counter_backend.h"

namespace flopscope::injector::cupti::testing {

// A scripted CounterBackend that pairs with FakeRangeProfiler: a range's counters are made from
// the tag the fake GPU stored for it, so a test can tell from a KernelFlops record which
// kernel's counters it got (a shifted pairing shows). For tag t:
//   sm__sass_thread_inst_executed_op_fadd_pred_on.sum = t        (fp32 += t)
//   sm__sass_thread_inst_executed_op_ffma_pred_on.sum = 2t       (fp32 += 4t)
//   sm__sass_thread_inst_executed_op_dfma_pred_on.sum = 3t       (fp64  = 6t)
//   sm__ops_path_tensor_src_fp16_dst_fp32.sum = 1000t (full set only: tensor fp16_dst_fp32)
//   gpu__time_duration.sum = 7, or NaN with time_uncollected     (raw only)
// so fp32 = 5t, fp64 = 6t and, with the full set, tensor = 1000t.
class FakeCounterBackend : public CounterBackend {
 public:
  static constexpr const char* kFadd = "sm__sass_thread_inst_executed_op_fadd_pred_on.sum";
  static constexpr const char* kFfma = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum";
  static constexpr const char* kDfma = "sm__sass_thread_inst_executed_op_dfma_pred_on.sum";
  static constexpr const char* kTensor = "sm__ops_path_tensor_src_fp16_dst_fp32.sum";
  static constexpr const char* kTime = "gpu__time_duration.sum";

  bool SupportsChip(std::string_view chip, std::string* why) override;
  bool Plan(std::string_view chip, counters::MetricSetKind metric_set,
            const std::vector<uint8_t>& availability, CounterPlan* out,
            std::string* error) override;
  std::unique_ptr<RangeEvaluator> MakeEvaluator(const CounterPlan& plan,
                                                std::string* error) override;

  std::set<std::string> chips = {"GH100"};
  bool time_uncollected = false;  // gpu__time_duration.sum comes back NaN, as CUPTI does
  std::atomic<int> plans{0};
  std::atomic<int> plans_with_availability{0};
};

}  // namespace flopscope::injector::cupti::testing
