#include "injector/cupti/tracer_options.h"

#include <cerrno>
#include <cstdlib>

#include "injector/injector_config.h"

namespace flopscope::injector::cupti {
namespace {

constexpr const char* kNvtxOnly = ": NVTX ranges only";

bool ReadSwitch(const EnvLookup& env, const char* name, bool fallback,
                std::vector<std::string>* warnings) {
  const char* text = env(name);
  if (text == nullptr || *text == '\0') return fallback;
  const std::string value = text;
  if (value == "1" || value == "on" || value == "true") return true;
  if (value == "0" || value == "off" || value == "false") return false;
  warnings->push_back(std::string("ignoring ") + name + "='" + value +
                      "': expected 0 or 1, using " + (fallback ? "1" : "0"));
  return fallback;
}

}  // namespace

TracerOptions TracerOptionsFromEnvironment(const EnvLookup& env) {
  TracerOptions options;
  options.enabled = ReadSwitch(env, "FLOPSCOPE_KERNELS", true, &options.warnings);
  if (const char* path = env("FLOPSCOPE_CUPTI_PATH")) options.cupti_path = path;
  options.buffer_cap_bytes = ReadBoundedEnv(env, "FLOPSCOPE_CUPTI_BUFFER_MB", 4, 4096,
                                            options.buffer_cap_bytes >> 20, &options.warnings)
                             << 20;
  options.finalize_at_exit = ReadSwitch(env, "FLOPSCOPE_CUPTI_FINALIZE", false, &options.warnings);
  if (const char* dir = env("FLOPSCOPE_RECORD_DIR")) options.record_dir = dir;
  return options;
}

std::string DescribeAttachFailure(AttachStep step, CUptiResult result,
                                  const std::string& result_text, const std::string& holder) {
  switch (result) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "CUPTI is held by another tool (" +
             (holder.empty() ? std::string("nsys, ncu, compute-sanitizer, cuda-gdb or a "
                                           "framework profiler")
                             : holder) +
             ")" + kNvtxOnly;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return std::string(
                 "GPU profiling is restricted to administrators "
                 "(NVreg_RestrictProfilingToAdminUsers=1)") +
             kNvtxOnly;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_UNKNOWN:
      return "CUPTI could not start (" + result_text + "; no usable CUDA driver?)" + kNvtxOnly;
    default:
      break;
  }
  const char* what = "cuptiSubscribe";
  switch (step) {
    case AttachStep::kSubscribe:
      break;
    case AttachStep::kEnableCallbacks:
      what = "cuptiEnableCallback";
      break;
    case AttachStep::kRegisterBuffers:
      what = "cuptiActivityRegisterCallbacks";
      break;
    case AttachStep::kEnableActivity:
      what = "cuptiActivityEnable(CONCURRENT_KERNEL)";
      break;
  }
  return std::string(what) + " failed (" + result_text + ")" + kNvtxOnly;
}

}  // namespace flopscope::injector::cupti
