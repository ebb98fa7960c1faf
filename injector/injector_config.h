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
  // The spool for batches the daemon has not acknowledged (docs/architecture.md, "Spool and
  // memory budget"): FLOPSCOPE_SPOOL_MB bounds the session's file (0: no spool, default 1024);
  // FLOPSCOPE_SPOOL_DIR, else $XDG_RUNTIME_DIR/flopscope-spool, else
  // /var/tmp/flopscope-spool-<uid>. A directory that is not ours and 0700 is refused and
  // ResolveSpoolDirectory falls back to a private one; it then sets spool_dir to the folder in
  // it of the daemon at `target` (common/spool_dir.h, SpoolDestinationName).
  uint64_t spool_bytes = 1024ull << 20;
  std::string spool_dir;
  // Why there is no spool although FLOPSCOPE_SPOOL_MB asks for one (ResolveSpoolDirectory): for
  // the exit line, which names the cause. Empty otherwise.
  std::string spool_off_reason;
  std::vector<std::string> warnings;
};

InjectorConfig ConfigFromEnvironment(const EnvLookup& env);

// Checks the spool directory as the session starts, when batches go to a daemon through a spool:
// a directory another user made first, or that is open to others, is refused with a warning
// naming it and its owner, and a private fallback of ours is used instead
// (common/spool_dir.h, ChooseSpoolDirectory). `fallback_root` is /var/tmp but in tests.
void ResolveSpoolDirectory(InjectorConfig* config, const std::string& fallback_root = "/var/tmp");

// Reads the integer environment variable `name` in [min, max]; returns `fallback` when it is unset,
// and also (with a line in `warnings`) when it is malformed or out of range.
uint64_t ReadBoundedEnv(const EnvLookup& env, const char* name, uint64_t min, uint64_t max,
                        uint64_t fallback, std::vector<std::string>* warnings);

}  // namespace flopscope::injector
