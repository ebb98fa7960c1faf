#!/usr/bin/env bash
# Packs a built tree into a relocatable bundle (`make dist`):
#
#   <build>/dist/flopscope-<version>-linux-x86_64.tar.gz
#     bin/     flopscoped, flopscope (RPATH $ORIGIN/../lib)
#     lib/     libflopscope_inject.so, libflopscope_transport.so, libflopscope_torch_nvtx.so and
#              every shared library they or bin/ need, except the C/C++ runtime (glibc's own
#              libraries, libstdc++, libgcc_s), each with RPATH $ORIGIN
#     python/  flopscope_torch/ and autostart/ (what `flopscope run --torch` puts on PYTHONPATH)
#     share/flopscope/  deploy/, docs, the tests/gpu sources and tests/gpu/acceptance.sh
#
# DT_RPATH (patchelf --force-rpath), not DT_RUNPATH: RPATH is searched before LD_LIBRARY_PATH, so a
# job whose LD_LIBRARY_PATH holds another libprotobuf or libgrpc (conda, a framework's wheels)
# still gets the bundle's copies. The transport is dlmopen'ed into a fresh link namespace by the
# injector (injector/export/transport_loader.cc: the file beside the injector's own); its
# dependencies resolve there through its own RPATH $ORIGIN.
#
# libcupti is not bundled: the injector and `flopscope counters` open the one of the CUDA 13
# toolkit or driver install on the node (or FLOPSCOPE_CUPTI_PATH; counters/cupti_library.h).
#
# Usage: scripts/make_dist.sh BUILD_DIR [OUTPUT_DIR]   (default OUTPUT_DIR: BUILD_DIR/dist)
# Needs patchelf (scripts/setup_deps.sh installs it), ldd, strip, tar, gzip.
set -euo pipefail

readonly MAX_BYTES=$((64 * 1024 * 1024))
# The C/C++ runtime every x86-64 Linux node has: glibc's libraries (they must match the node's
# libc, so they are never copied), libstdc++ and libgcc_s.
readonly RUNTIME_RE='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'

die() { echo "make_dist: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || die "usage: $0 BUILD_DIR [OUTPUT_DIR]"
BUILD_DIR=$(cd "$1" && pwd)
OUTPUT_DIR=${2:-$BUILD_DIR/dist}
SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v patchelf >/dev/null || die "patchelf not found (apt-get install patchelf, or scripts/setup_deps.sh)"

VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD_DIR/CMakeCache.txt")
[[ -n "$VERSION" ]] || die "$BUILD_DIR/CMakeCache.txt has no CMAKE_PROJECT_VERSION"
NAME="flopscope-$VERSION-linux-x86_64"
STAGE="$OUTPUT_DIR/$NAME"
TARBALL="$OUTPUT_DIR/$NAME.tar.gz"

BINARIES=(bin/flopscoped bin/flopscope)
OUR_LIBS=(lib/libflopscope_inject.so lib/libflopscope_transport.so lib/libflopscope_torch_nvtx.so)
for file in "${BINARIES[@]}" "${OUR_LIBS[@]}"; do
  [[ -f "$BUILD_DIR/$file" ]] || die "$BUILD_DIR/$file is not built (cmake --build $BUILD_DIR)"
done

rm -rf "$STAGE" "$TARBALL"
mkdir -p "$STAGE"/{bin,lib,python,share/flopscope}

# Copies one ELF file, strips its debug info (symbols stay, for backtraces) and sets its RPATH.
install_elf() {
  local source=$1 target=$2 rpath=$3
  cp -L "$source" "$target"
  chmod u+w "$target"
  strip --strip-debug "$target"
  patchelf --force-rpath --set-rpath "$rpath" "$target"
}

for file in "${BINARIES[@]}"; do install_elf "$BUILD_DIR/$file" "$STAGE/$file" '$ORIGIN/../lib'; done
for file in "${OUR_LIBS[@]}"; do install_elf "$BUILD_DIR/$file" "$STAGE/$file" '$ORIGIN'; done

# The closure of what they need, as this machine's loader resolves it (ldd lists indirect
# dependencies too). Each library keeps its soname as file name: that is what DT_NEEDED asks for.
declare -A bundled=()
while read -r soname path; do
  [[ "$soname" =~ $RUNTIME_RE ]] && continue
  [[ "$path" == /* && -f "$path" ]] || die "cannot resolve $soname (ldd says: ${path:-nothing})"
  [[ -n "${bundled[$soname]:-}" ]] && continue
  bundled[$soname]=$path
  install_elf "$path" "$STAGE/lib/$soname" '$ORIGIN'
done < <(for file in "${BINARIES[@]}" "${OUR_LIBS[@]}"; do ldd "$BUILD_DIR/$file"; done |
         awk '$2 == "=>" { print $1, $3 } $2 != "=>" && $1 !~ /^\// { print $1, "" }' | sort -u)

# Where each bundled library came from (Debian package and version), for licences and audits.
{
  echo "# soname  source file  Debian package"
  for soname in $(printf '%s\n' "${!bundled[@]}" | sort); do
    real=$(realpath "${bundled[$soname]}")
    # dpkg knows a file by the path its package shipped it under: /usr/lib or (merged-/usr) /lib.
    package=$({ dpkg -S "$real" || dpkg -S "${real#/usr}"; } 2>/dev/null | head -1 | cut -d: -f1 || true)
    version=$([[ -n "$package" ]] && dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true)
    echo "$soname  ${bundled[$soname]}  ${package:-?} ${version}"
  done
} > "$STAGE/share/flopscope/BUNDLED_LIBRARIES"

# The torch hooks, as the build tree lays them out (python/CMakeLists.txt), minus byte code.
cp -r "$BUILD_DIR/python/flopscope_torch" "$BUILD_DIR/python/autostart" "$STAGE/python/"
find "$STAGE/python" -name __pycache__ -prune -exec rm -rf {} +

SHARE="$STAGE/share/flopscope"
cp -r "$SOURCE_DIR/deploy" "$SHARE/deploy"
mkdir -p "$SHARE/docs/design" "$SHARE/tests/gpu" "$SHARE/tests/integration"
cp "$SOURCE_DIR/README.md" "$SHARE/"
cp "$SOURCE_DIR"/docs/*.md "$SHARE/docs/"
cp "$SOURCE_DIR"/docs/design/*.md "$SHARE/docs/design/"  # the pages docs/architecture.md links
cp "$SOURCE_DIR"/tests/gpu/*.{cu,h,py,sh} "$SHARE/tests/gpu/"
cp "$SOURCE_DIR/tests/integration/harness.py" "$SHARE/tests/integration/"
cp "$SOURCE_DIR/tests/unittest_runner.py" "$SHARE/tests/"  # the tests/gpu scripts' exit codes
echo "$VERSION" > "$SHARE/VERSION"
git -C "$SOURCE_DIR" rev-parse HEAD > "$SHARE/COMMIT" 2>/dev/null || echo unknown > "$SHARE/COMMIT"

# The newest glibc symbol version anything in the bundle needs: the oldest glibc it runs on.
needs_glibc=$(find "$STAGE/bin" "$STAGE/lib" -type f -exec objdump -T {} + 2>/dev/null |
              grep -o 'GLIBC_[0-9.]*' | sort -V -u | tail -1)
echo "${needs_glibc#GLIBC_}" > "$SHARE/GLIBC_MINIMUM"

tar -C "$OUTPUT_DIR" -czf "$TARBALL" "$NAME"
size=$(stat -c %s "$TARBALL")
echo "make_dist: $TARBALL: $((size / 1024)) KiB compressed, ${#bundled[@]} bundled libraries," \
     "needs glibc >= ${needs_glibc#GLIBC_}"
((size < MAX_BYTES)) || die "$TARBALL is $size bytes, over the 64 MiB limit"
