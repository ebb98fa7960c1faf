#pragma once

#include <string>

namespace flopscope {

// The node daemon's socket: a directory only root can create (/run is root's), so no other user
// can put a socket of their own at this path.
inline constexpr char kNodeSocketPath[] = "/run/flopscope/flopscope.sock";

// What DefaultSocketPath decides from (gathered from the environment and the file system).
struct SocketPathFacts {
  std::string explicit_socket;       // $FLOPSCOPE_SOCKET
  bool node_socket_exists = false;   // kNodeSocketPath is there
  bool is_root = false;              // may create /run/flopscope (a node daemon)
  std::string runtime_dir;           // $XDG_RUNTIME_DIR
  bool runtime_dir_private = false;  // a directory owned by this user, mode 0700
};

// $FLOPSCOPE_SOCKET; else kNodeSocketPath when it exists or for root; else
// $XDG_RUNTIME_DIR/flopscope.sock when that directory is the user's own and private (a personal
// daemon); else kNodeSocketPath. Never a path in a directory another user could write (no /tmp
// fallback: another user could serve a socket there and capture the job's data).
std::string ChooseSocketPath(const SocketPathFacts& facts);

// The daemon's default unix socket, shared by daemon, client and injector so that all three agree
// without configuration (DESIGN: Transport): ChooseSocketPath over this process's facts.
std::string DefaultSocketPath();

// "unix:/abs/path" for a socket path (a relative one, "./x", "../x" or any name without a colon,
// is made absolute against the working directory), or the string unchanged when it already
// names a scheme ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"); a bare "host:port" is
// left as is.
std::string GrpcTarget(const std::string& socket_or_target);

}  // namespace flopscope
