#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <vector>

#include "injector/records/identity.h"

namespace flopscope::injector::cupti {

// Settings of kernel tracing, from the environment; each malformed value is reported in
// `warnings` and replaced by its default.
struct TracerOptions {
  bool enabled = true;                      // FLOPSCOPE_KERNELS=0 turns kernel tracing off
  std::string cupti_path;                   // FLOPSCOPE_CUPTI_PATH: libcupti to use
  uint64_t buffer_cap_bytes = 32ull << 20;  // FLOPSCOPE_CUPTI_BUFFER_MB (4..4096, default 32)
  // FLOPSCOPE_CUPTI_FINALIZE=1: cuptiFinalize after the exit's forced flush. Off by default,
  // as in NVIDIA's samples: from exit() it races the job's other threads (review D2).
  bool finalize_at_exit = false;
  // FLOPSCOPE_RECORD_DIR: write what CUPTI delivers there for replay (tests/data/gpu/README.md).
  std::string record_dir;
  // How long activity buffers may stay away while launches go on before the tracer concludes
  // that another CUPTI client took them (review D9). Not an environment setting (tests).
  uint64_t takeover_stall_ms = 30000;
  std::vector<std::string> warnings;
};

TracerOptions TracerOptionsFromEnvironment(const EnvLookup& env);

// What the attach did, in the words `flopscope report` shows when a rank has no kernels.
enum class AttachStep { kSubscribe, kEnableCallbacks, kRegisterBuffers, kEnableActivity };

// One sentence naming the cause and the consequence, e.g. "CUPTI is held by another tool
// (CUPTI for Nsight Systems): NVTX ranges only". `holder` is what cuptiSubscribe_v2 said holds
// the subscriber (may be empty); `result_text` is CUPTI's name for `result`.
std::string DescribeAttachFailure(AttachStep step, CUptiResult result,
                                  const std::string& result_text, const std::string& holder);

}  // namespace flopscope::injector::cupti
