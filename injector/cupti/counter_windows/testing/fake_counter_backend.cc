#include "injector/cupti/counter_windows/testing/fake_counter_backend.h"

#include <cstring>
#include <limits>

namespace flopscope::injector::cupti::testing {
namespace {

class TagEvaluator : public RangeEvaluator {
 public:
  TagEvaluator(std::vector<std::string> metrics, double time)
      : metrics_(std::move(metrics)), time_(time) {}

  bool Evaluate(const uint8_t* image, size_t size, size_t range, std::vector<double>* values,
                std::string* error) override {
    uint64_t ranges = 0;
    if (size < sizeof ranges) {
      *error = "no image";
      return false;
    }
    std::memcpy(&ranges, image, sizeof ranges);
    if (range >= ranges) {
      *error = "no range " + std::to_string(range);
      return false;
    }
    uint64_t tag = 0;
    std::memcpy(&tag, image + sizeof(uint64_t) * (1 + range), sizeof tag);
    const double t = static_cast<double>(tag);
    for (const std::string& metric : metrics_) {
      values->push_back(metric == FakeCounterBackend::kFadd     ? t
                        : metric == FakeCounterBackend::kFfma   ? 2 * t
                        : metric == FakeCounterBackend::kDfma   ? 3 * t
                        : metric == FakeCounterBackend::kTensor ? 1000 * t
                                                                : time_);
    }
    return true;
  }

 private:
  const std::vector<std::string> metrics_;
  const double time_;
};

}  // namespace

bool FakeCounterBackend::SupportsChip(std::string_view chip, std::string* why) {
  if (chips.count(std::string(chip)) > 0) return true;
  *why = "chip " + std::string(chip) + " has no metric set in this flopscope (timing only)";
  return false;
}

bool FakeCounterBackend::Plan(std::string_view chip, counters::MetricSetKind metric_set,
                              const std::vector<uint8_t>& availability, CounterPlan* out,
                              std::string* error) {
  ++plans;
  if (!availability.empty()) ++plans_with_availability;
  if (!SupportsChip(chip, error)) return false;
  const bool full = metric_set == counters::MetricSetKind::kFull;
  out->chip = std::string(chip);
  out->metric_set = metric_set;
  out->metrics = {kFadd, kFfma, kDfma, kTime};
  if (full) out->metrics.push_back(kTensor);
  out->passes = full ? 6 : 2;
  out->config_image = {1, 2, 3};
  out->availability = availability;
  return true;
}

std::unique_ptr<RangeEvaluator> FakeCounterBackend::MakeEvaluator(const CounterPlan& plan,
                                                                  std::string*) {
  return std::make_unique<TagEvaluator>(
      plan.metrics, time_uncollected ? std::numeric_limits<double>::quiet_NaN() : 7.0);
}

}  // namespace flopscope::injector::cupti::testing
