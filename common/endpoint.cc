#include "common/endpoint.h"

#include <unistd.h>

#include <cstdlib>

namespace flopscope {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? std::string(value) : fallback;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string DefaultSocketPath() {
  if (const char* explicit_path = std::getenv("FLOPSCOPE_SOCKET");
      explicit_path != nullptr && *explicit_path != '\0') {
    return explicit_path;
  }
  if (access("/run/flopscope", W_OK | X_OK) == 0) return "/run/flopscope/flopscope.sock";
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && *runtime != '\0' && access(runtime, W_OK | X_OK) == 0) {
    return std::string(runtime) + "/flopscope.sock";
  }
  return EnvOr("TMPDIR", "/tmp") + "/flopscope-" + std::to_string(getuid()) + ".sock";
}

std::string GrpcTarget(const std::string& socket_or_target) {
  for (const char* scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"}) {
    if (StartsWith(socket_or_target, scheme)) return socket_or_target;
  }
  if (!socket_or_target.empty() && socket_or_target[0] == '/') return "unix:" + socket_or_target;
  if (StartsWith(socket_or_target, "./") || StartsWith(socket_or_target, "../")) {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr)
      return "unix:" + std::string(cwd) + "/" + socket_or_target;
  }
  return socket_or_target;
}

}  // namespace flopscope
