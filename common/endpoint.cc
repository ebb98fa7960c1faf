#include "common/endpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace flopscope {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// A directory owned by this user that no one else may enter.
bool IsPrivateDirectory(const std::string& dir) {
  struct stat info;
  if (dir.empty() || stat(dir.c_str(), &info) != 0) return false;
  return S_ISDIR(info.st_mode) && info.st_uid == getuid() && (info.st_mode & 077) == 0;
}

}  // namespace

std::string ChooseSocketPath(const SocketPathFacts& facts) {
  if (!facts.explicit_socket.empty()) return facts.explicit_socket;
  if (facts.node_socket_exists || facts.is_root) return kNodeSocketPath;
  if (!facts.runtime_dir.empty() && facts.runtime_dir_private) {
    return facts.runtime_dir + "/flopscope.sock";
  }
  return kNodeSocketPath;
}

std::string DefaultSocketPath() {
  SocketPathFacts facts;
  facts.explicit_socket = Env("FLOPSCOPE_SOCKET");
  if (!facts.explicit_socket.empty()) return facts.explicit_socket;
  struct stat info;
  facts.node_socket_exists = lstat(kNodeSocketPath, &info) == 0 && S_ISSOCK(info.st_mode);
  facts.is_root = geteuid() == 0;
  facts.runtime_dir = Env("XDG_RUNTIME_DIR");
  facts.runtime_dir_private = IsPrivateDirectory(facts.runtime_dir);
  return ChooseSocketPath(facts);
}

std::string GrpcTarget(const std::string& socket_or_target) {
  for (const char* scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"}) {
    if (StartsWith(socket_or_target, scheme)) return socket_or_target;
  }
  if (!socket_or_target.empty() && socket_or_target[0] == '/') return "unix:" + socket_or_target;
  // A relative socket path: "./x", "../x", or any name without a colon (which cannot be a
  // HOST:PORT). gRPC would resolve a bare "fs.sock" as a DNS name.
  const bool relative_path =
      StartsWith(socket_or_target, "./") || StartsWith(socket_or_target, "../") ||
      (!socket_or_target.empty() && socket_or_target.find(':') == std::string::npos);
  if (relative_path) {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr)
      return "unix:" + std::string(cwd) + "/" + socket_or_target;
  }
  return socket_or_target;
}

}  // namespace flopscope
