#include "importer/counter_joiner.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "common/flop_formulas.h"

namespace flopscope::importer {
namespace {

// The daemon's limits on one kernel's counters (daemon/validate/batch_validator.h).
constexpr int kMaxRaw = 1024;
constexpr int kMaxTensorSources = 64;

std::vector<size_t> KernelsByStart(const TraceRecording& recording) {
  std::vector<size_t> kernels;
  for (size_t i = 0; i < recording.activities.size(); ++i) {
    if (recording.activities[i].kind == v1::ACTIVITY_KIND_KERNEL) kernels.push_back(i);
  }
  std::stable_sort(kernels.begin(), kernels.end(), [&recording](size_t a, size_t b) {
    return recording.activities[a].start_ns < recording.activities[b].start_ns;
  });
  return kernels;
}

std::vector<uint64_t> KernelLaunchesByTime(const TraceRecording& recording) {
  std::vector<std::pair<int64_t, uint64_t>> launches;
  for (const auto& [correlation, site] : recording.launches) {
    if (site.launches_kernel) launches.emplace_back(site.time_ns, correlation);
  }
  std::sort(launches.begin(), launches.end());
  std::vector<uint64_t> correlations;
  for (const auto& launch : launches) correlations.push_back(launch.second);
  return correlations;
}

std::vector<size_t> SamplesByStart(const TraceRecording& recording) {
  std::vector<size_t> order(recording.counter_samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&recording](size_t a, size_t b) {
    return recording.counter_samples[a].start_ns < recording.counter_samples[b].start_ns;
  });
  return order;
}

}  // namespace

v1::FlopCounters CounterJoiner::FlopsOf(const TraceRecording& recording,
                                        const CounterSample& sample) {
  v1::FlopCounters flops;
  CudaCoreInstructions counts;
  for (const auto& [metric_id, value] : sample.counters) {
    const std::string& metric = recording.strings.Get(metric_id);
    AccumulateInstructionCounter(metric, value, &counts);
    if (const std::string source = TensorSourceOfMetric(metric);
        !source.empty() && flops.tensor_size() < kMaxTensorSources) {
      v1::FlopCounters::Tensor* tensor = flops.add_tensor();
      tensor->set_source(source);
      tensor->set_flops(value);
    }
    if (flops.raw_size() < kMaxRaw) {
      v1::FlopCounters::Raw* raw = flops.add_raw();
      raw->set_metric(metric);
      raw->set_value(value);
    }
  }
  const CudaCoreFlops cuda_core = CudaCoreFlopsFrom(counts);
  flops.set_fp64(cuda_core.fp64);
  flops.set_fp32(cuda_core.fp32);
  flops.set_fp16(cuda_core.fp16);
  return flops;
}

CounterJoiner::Result CounterJoiner::Join(TraceRecording* recording,
                                          absl::flat_hash_map<size_t, v1::FlopCounters>* flops) {
  Result result;
  if (recording->counter_samples.empty()) return result;
  const std::vector<size_t> samples = SamplesByStart(*recording);
  const std::vector<size_t> kernels = KernelsByStart(*recording);
  if (!kernels.empty()) {
    bool match = kernels.size() == samples.size();
    for (size_t i = 0; match && i < samples.size(); ++i) {
      const std::string& name = recording->strings.Get(recording->counter_samples[samples[i]].name);
      match = name == "__missing__" ||
              recording->activities[kernels[i]].name == recording->counter_samples[samples[i]].name;
    }
    if (!match) {
      result.how = "none (the counter samples do not match the kernels one to one)";
      result.unmatched = samples.size();
      return result;
    }
    for (size_t i = 0; i < samples.size(); ++i) {
      (*flops)[kernels[i]] = FlopsOf(*recording, recording->counter_samples[samples[i]]);
    }
    result.how = "kernel order";
    result.joined = samples.size();
    return result;
  }
  const std::vector<uint64_t> launches = KernelLaunchesByTime(*recording);
  const bool by_launch = launches.size() == samples.size();
  const uint32_t device = recording->devices.empty() ? 0 : recording->devices[0].index();
  for (size_t i = 0; i < samples.size(); ++i) {
    const CounterSample& sample = recording->counter_samples[samples[i]];
    GpuActivity kernel;
    kernel.kind = v1::ACTIVITY_KIND_KERNEL;
    kernel.name = sample.name;
    kernel.device = device;
    kernel.start_ns = sample.start_ns;
    kernel.end_ns = sample.end_ns;
    kernel.correlation_id = by_launch ? launches[i] : 0;
    (*flops)[recording->activities.size()] = FlopsOf(*recording, sample);
    recording->activities.push_back(kernel);
  }
  result.how = by_launch ? "launch order (kernel records made from the counter samples)"
                         : "none (kernel records made from the counter samples; launch count "
                           "differs, so they are unattributed)";
  result.joined = samples.size();
  return result;
}

}  // namespace flopscope::importer
