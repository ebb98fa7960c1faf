#pragma once

#include <string>

namespace flopscope {

// The daemon's default unix socket, shared by daemon, client and injector so that all three agree
// without configuration (DESIGN: Transport):
//   $FLOPSCOPE_SOCKET, else /run/flopscope/flopscope.sock when /run/flopscope exists and is
//   writable, else $XDG_RUNTIME_DIR/flopscope.sock, else $TMPDIR (or /tmp)/flopscope-<uid>.sock.
std::string DefaultSocketPath();

// "unix:/abs/path" for a socket path, or the string unchanged when it already names a scheme
// ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"); a bare "host:port" is left as is.
std::string GrpcTarget(const std::string& socket_or_target);

}  // namespace flopscope
