#include "injector/injector_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/endpoint.h"
#include "common/spool_dir.h"

namespace flopscope::injector {
namespace {

std::string ReadString(const EnvLookup& env, const char* name) {
  const char* text = env(name);
  return text == nullptr ? std::string() : std::string(text);
}

}  // namespace

InjectorConfig ConfigFromEnvironment(const EnvLookup& env) {
  InjectorConfig config;
  config.buffer_bytes = ReadBoundedEnv(env, "FLOPSCOPE_BUFFER_MB", 1, 65536,
                                       config.buffer_bytes >> 20, &config.warnings)
                        << 20;
  config.flush_ms = static_cast<uint32_t>(
      ReadBoundedEnv(env, "FLOPSCOPE_FLUSH_MS", 1, 60000, config.flush_ms, &config.warnings));
  config.exit_timeout_ms = static_cast<uint32_t>(ReadBoundedEnv(
      env, "FLOPSCOPE_EXIT_TIMEOUT_MS", 0, 600000, config.exit_timeout_ms, &config.warnings));
  // DefaultSocketPath() reads FLOPSCOPE_SOCKET from the real environment; honour the lookup.
  const std::string socket = ReadString(env, "FLOPSCOPE_SOCKET");
  config.target = GrpcTarget(socket.empty() ? DefaultSocketPath() : socket);
  config.dump_path = ReadString(env, "FLOPSCOPE_DEBUG_DUMP");
  config.transport_path = ReadString(env, "FLOPSCOPE_TRANSPORT_PATH");
  config.spool_bytes = ReadBoundedEnv(env, "FLOPSCOPE_SPOOL_MB", 0, 1 << 20,
                                      config.spool_bytes >> 20, &config.warnings)
                       << 20;
  config.spool_dir = ReadString(env, "FLOPSCOPE_SPOOL_DIR");
  if (config.spool_dir.empty()) {
    const std::string runtime = ReadString(env, "XDG_RUNTIME_DIR");
    config.spool_dir = !runtime.empty() ? runtime + "/flopscope-spool"
                                        : "/var/tmp/flopscope-spool-" + std::to_string(geteuid());
  }
  const std::string clock = ReadString(env, "FLOPSCOPE_CLOCK");
  if (clock == "realtime") {
    config.realtime_clock = true;
  } else if (!clock.empty() && clock != "auto") {
    config.warnings.push_back("ignoring FLOPSCOPE_CLOCK='" + clock +
                              "': expected auto or realtime, using auto");
  }
  return config;
}

void ResolveSpoolDirectory(InjectorConfig* config, const std::string& fallback_root) {
  if (!config->dump_path.empty() || config->spool_bytes == 0) return;
  SpoolDirectoryChoice choice = ChooseSpoolDirectory(config->spool_dir, fallback_root);
  if (!choice.warning.empty()) config->warnings.push_back(std::move(choice.warning));
  config->spool_off_reason = std::move(choice.error);
  config->spool_dir.clear();
  if (choice.dir.empty()) return;
  // The folder of the daemon this session is for: only that daemon delivers what waits there.
  const std::string folder = choice.dir + "/" + SpoolDestinationName(config->target);
  std::string error;
  if (!PrepareSpoolDirectory(folder, &error)) {
    config->spool_off_reason = error;
    config->warnings.push_back("SPOOL OFF: " + error +
                               "; records the daemon has not acknowledged are lost if it is "
                               "away or this process is killed");
    return;
  }
  config->spool_dir = folder;
}

uint64_t ReadBoundedEnv(const EnvLookup& env, const char* name, uint64_t min, uint64_t max,
                        uint64_t fallback, std::vector<std::string>* warnings) {
  const char* text = env(name);
  if (text == nullptr || *text == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || *text == '-' || value < min || value > max) {
    warnings->push_back(std::string("ignoring ") + name + "='" + text +
                        "': expected an integer in [" + std::to_string(min) + ", " +
                        std::to_string(max) + "], using " + std::to_string(fallback));
    return fallback;
  }
  return value;
}

}  // namespace flopscope::injector
