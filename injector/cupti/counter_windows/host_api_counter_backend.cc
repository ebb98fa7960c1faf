#include "injector/cupti/counter_windows/host_api_counter_backend.h"

#include "counters/counter_evaluator.h"
#include "counters/metric_planner.h"

namespace flopscope::injector::cupti {
namespace {

class HostApiEvaluator final : public RangeEvaluator {
 public:
  bool Init(const counters::ProfilerHostApi& api, const CounterPlan& plan, std::string* error) {
    return evaluator_.Init(api, plan.chip, plan.metrics,
                           plan.availability.empty() ? nullptr : plan.availability.data(),
                           plan.availability.size(), error);
  }
  bool Evaluate(const uint8_t* image, size_t size, size_t range, std::vector<double>* values,
                std::string* error) override {
    return evaluator_.Evaluate(image, size, range, values, error);
  }

 private:
  counters::CounterEvaluator evaluator_;
};

class HostApiCounterBackend final : public CounterBackend {
 public:
  HostApiCounterBackend(const counters::ProfilerHostApi& api, std::function<void()> after_use)
      : api_(api), after_use_(std::move(after_use)) {}

  bool SupportsChip(std::string_view chip, std::string* why) override {
    std::vector<std::string> candidates;
    if (counters::CandidateMetrics(chip, counters::MetricSetKind::kCheap, &candidates)) {
      return true;
    }
    *why = "chip " + std::string(chip) + " has no metric set in this flopscope (timing only)";
    return false;
  }

  bool Plan(std::string_view chip, counters::MetricSetKind metric_set,
            const std::vector<uint8_t>& availability, CounterPlan* out,
            std::string* error) override {
    // A planner per call: MetricPlanner is not thread-safe, and planning is rare (once per
    // context and set), so sharing one would buy nothing.
    counters::MetricPlanner planner(api_);
    counters::MetricPlan plan;
    const bool planned =
        planner.Plan(chip, metric_set, availability.empty() ? nullptr : availability.data(),
                     availability.size(), &plan, error);
    AfterUse();
    if (!planned) return false;
    out->chip = plan.chip;
    out->metric_set = plan.kind;
    out->metrics = std::move(plan.metrics);
    out->passes = plan.passes;
    out->config_image = std::move(plan.config_image);
    out->availability = availability;
    return true;
  }

  std::unique_ptr<RangeEvaluator> MakeEvaluator(const CounterPlan& plan,
                                                std::string* error) override {
    auto evaluator = std::make_unique<HostApiEvaluator>();
    const bool ready = evaluator->Init(api_, plan, error);
    AfterUse();
    if (!ready) return nullptr;
    return evaluator;
  }

 private:
  void AfterUse() {
    if (after_use_) after_use_();
  }

  const counters::ProfilerHostApi api_;
  const std::function<void()> after_use_;
};

}  // namespace

std::unique_ptr<CounterBackend> MakeHostApiCounterBackend(
    const counters::ProfilerHostApi& api, std::function<void()> after_host_api_use) {
  return std::make_unique<HostApiCounterBackend>(api, std::move(after_host_api_use));
}

}  // namespace flopscope::injector::cupti
