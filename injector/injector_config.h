#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "injector/records/identity.h"

namespace flopscope::injector {

// Settings read from the environment at session start. Every value has a default that works;
// a malformed value is reported (warnings) and replaced by the default.
struct InjectorConfig {
  uint64_t buffer_bytes = 64ull << 20;  // FLOPSCOPE_BUFFER_MB (default 64)
  uint32_t flush_ms = 100;              // FLOPSCOPE_FLUSH_MS
  uint32_t exit_timeout_ms = 5000;      // FLOPSCOPE_EXIT_TIMEOUT_MS
  std::string target;  // gRPC target from FLOPSCOPE_SOCKET, else flopscope::DefaultSocketPath()
  // FLOPSCOPE_DEBUG_DUMP=<file>: test-only; batches are written to the file as text instead of
  // being sent (format in dump_sink.h).
  std::string dump_path;
  // FLOPSCOPE_TRANSPORT_PATH: the transport library, else libflopscope_transport.so beside the
  // injector.
  std::string transport_path;
  // FLOPSCOPE_CLOCK=realtime: time ranges with clock_gettime even where the TSC could be used
  // (see RangeClock); "auto" (the default) picks.
  bool realtime_clock = false;
  std::vector<std::string> warnings;
};

InjectorConfig ConfigFromEnvironment(const EnvLookup& env);

// Reads the integer environment variable `name` in [min, max]; returns `fallback` when it is unset,
// and also (with a line in `warnings`) when it is malformed or out of range.
uint64_t ReadBoundedEnv(const EnvLookup& env, const char* name, uint64_t min, uint64_t max,
                        uint64_t fallback, std::vector<std::string>* warnings);

}  // namespace flopscope::injector
