#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace flopscope::injector {

// Facts about this process that do not come from the environment; gathered by
// CollectHostFacts() in the injector, supplied directly by tests.
struct HostFacts {
  std::string host;
  int64_t pid = 0;
  int64_t start_time_ns = 0;  // CLOCK_REALTIME at session start
  std::string command;        // argv joined by spaces
};

struct ParallelLayout {
  uint32_t tp_size = 1, pp_size = 1, dp_size = 1;
  uint32_t tp_rank = 0, pp_rank = 0, dp_rank = 0;
  std::string source = "default";  // "env" when FLOPSCOPE_TP_SIZE / FLOPSCOPE_PP_SIZE were used
};

// Who this process is within its job (DESIGN: metadata channel); sent in the session hello.
struct SessionIdentity {
  std::string session_id;  // "<host>-<pid>-<start_ns>"
  std::string job_id;
  std::string host;
  std::string command;
  int64_t pid = 0;
  int64_t start_time_ns = 0;
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t world_size = 1;
  ParallelLayout layout;
  // Environment values that were ignored, phrased for the user (printed once at session start).
  std::vector<std::string> warnings;
};

// Returns the value of an environment variable, or null when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the identity: job id from FLOPSCOPE_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID (sanitized),
// else "<host>-<pid>-<start seconds>"; rank from RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
// SLURM_PROCID; LOCAL_RANK; WORLD_SIZE; FLOPSCOPE_TP_SIZE and FLOPSCOPE_PP_SIZE; dp = world /
// (tp * pp), rank order tp fastest, then pp, then dp.
SessionIdentity IdentityFromEnvironment(const EnvLookup& env, const HostFacts& facts);

// Host name, pid, CLOCK_REALTIME now and /proc/self/cmdline of the calling process.
HostFacts CollectHostFacts();

}  // namespace flopscope::injector
