// The CUPTI build's kernel tracing: a KernelTracer carrying counter windows, configured from the
// environment (kernel_tracing_disabled.cc is the build without CUPTI).
#include "injector/cupti/counter_windows/counter_collector.h"
#include "injector/cupti/counter_windows/counter_settings.h"
#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/tracer_options.h"
#include "injector/kernel_tracing.h"

namespace flopscope::injector {

std::unique_ptr<KernelTracing> MakeKernelTracing(TraceSink* sink, const EnvLookup& env,
                                                 std::vector<std::string>* warnings,
                                                 std::string* unavailable) {
  cupti::TracerOptions options = cupti::TracerOptionsFromEnvironment(env);
  warnings->insert(warnings->end(), options.warnings.begin(), options.warnings.end());
  if (!options.enabled) {
    *unavailable = "kernel tracing turned off (FLOPSCOPE_KERNELS=0): NVTX ranges only";
    return nullptr;
  }
  cupti::CounterSettings settings = cupti::CounterSettingsFromEnvironment(env);
  warnings->insert(warnings->end(), settings.warnings.begin(), settings.warnings.end());
  auto counters = std::make_unique<cupti::CounterCollector>(sink, std::move(settings));
  return std::make_unique<cupti::KernelTracer>(sink, std::move(options), std::nullopt,
                                               cupti::LaunchRing::kDefaultSlots,
                                               std::move(counters));
}

}  // namespace flopscope::injector
