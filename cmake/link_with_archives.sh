#!/bin/bash
# link_with_archives.sh LIBDIR LINK-COMMAND...: the link launcher of the `flopscope` client
# (client/CMakeLists.txt, RULE_LAUNCH_LINK; cmake -DFLOPSCOPE_STATIC_CLIENT=OFF goes without).
# Runs LINK-COMMAND with every system shared library on it that has a static archive beside it
# (Debian's gRPC, protobuf, Abseil, OpenSSL, SQLite, zlib, re2, c-ares) replaced by that
# archive; LIBDIR is the multiarch directory where `-lNAME` archives are looked for.
#
# Why: a `flopscope` command spent half of its CPU in the dynamic loader (59 libraries, 17 000
# symbol relocations: 13.8 ms for `jobs`, 5.6 ms linked with the archives). On a node whose
# cores are all busy, each of those milliseconds waits for a core; issue 15's `report` and
# `ranks` while 64 ranks start on two cores crossed 1 s with the shared libraries only
# (docs/reliability-rerun.md, row 4).
#
# Why a launcher: the dependencies' CMake targets (gRPC::grpc++ and the rest) name their shared
# objects, and every library of the tree carries them to whatever links it. The daemon and the
# injector keep them shared (the transport is itself a shared object, and Debian's archives use
# local-exec TLS, which a shared object cannot take), so only this one link is changed.
#
# Left shared: the C/C++ runtime (never on the line as a path), anything outside the system
# library directories (CUDA's), and libraries without an archive (simdjson, which needs nothing
# but libstdc++: no library is then in the program twice). tests/dist/check_static_client.sh
# checks the result.
set -euo pipefail
libdir=$1
shift
# Runtime libraries the compiler driver links on its own terms; never swapped for archives.
runtime='^-l(c|m|dl|rt|pthread|atomic|stdc\+\+|gcc|gcc_s|util|resolv|anl)$'
args=()
for arg in "$@"; do
  if [[ "$arg" =~ ^((/usr)?/lib/.*/lib[^/]+)\.so(\.[0-9.]+)?$ ]]; then
    archive="${BASH_REMATCH[1]}.a"
    [[ -f "$archive" ]] && arg=$archive
  elif [[ ! "$arg" =~ $runtime && "$arg" =~ ^-l(.+)$ ]]; then
    archive="$libdir/lib${BASH_REMATCH[1]}.a"
    [[ -f "$archive" ]] && arg=$archive
  fi
  args+=("$arg")
done
exec "${args[@]}"
