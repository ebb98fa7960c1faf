#!/usr/bin/env bash
# Installs the Debian 12 packages flopscope builds and tests with, only those that are missing.
# Idempotent: a machine that already has everything runs no apt command at all.
#
#   scripts/setup_deps.sh [build|test]   (default test)
#
# `build` is what building the tree and `make demo` need (about 60 MB of -dev packages);
# `test` adds what only the tests use: Debian's torch and grpcio (about 1 GB with their
# dependencies), clang for the thread-safety pass and the fuzzers, patchelf for `make dist`,
# chromium for the HTML report's browser test and `make screenshot`; then the torch 2 test
# environment, scripts/setup_torch2.sh (PyTorch 2.x through pip, pinned by
# requirements/torch2.txt: no time once made, a few minutes and 2.9 GB of downloads before).
set -euo pipefail

readonly SET=${1:-test}
[[ "$SET" == build || "$SET" == test ]] || { echo "usage: $0 [build|test]" >&2; exit 2; }

BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libsqlite3-dev sqlite3 zlib1g-dev libcli11-dev libsimdjson-dev
  libssl-dev  # flopscoped: SHA-256 of session resume tokens (also pulled in by libgrpc-dev)
  googletest libgtest-dev libgmock-dev libbenchmark-dev python3
  libcivetweb-dev  # flopscoped --metrics: the HTTP server of /metrics
  prometheus-cpp-dev  # flopscoped --metrics: the exposition text (prometheus-cpp's core library)
)

PACKAGES=("${BUILD_PACKAGES[@]}")
[[ "$SET" == build ]] || PACKAGES+=(
  clang libclang-rt-dev  # the thread-safety pass; the fuzzers' libFuzzer/ASan runtimes
  python3-grpcio python3-protobuf python3-torch
  python3-torchvision  # the torch 1.13 environment's torchvision (setup_torch_env.sh torch1)
  python3-venv  # scripts/setup_torch2.sh: the torch 2 test environment
  python3-dev  # flopscope_torch._native, the torch hooks' fast paths (pure Python without it)
  python3-pytest  # python/tests: the flopscope_torch tests run by pytest
  python3-mypy  # python/tests/test_typing.py: the package's type hints checked
  python3-setuptools python3-wheel  # flopscope_torch_install: pip builds python/pyproject.toml
  python3-jsonschema  # tests: the report's JSON against docs/report.schema.json
  patchelf  # make dist: $ORIGIN RPATHs in the bundle
  prometheus  # tests: a real Prometheus scrapes flopscoped --metrics
  chromium  # tests: the HTML report opened in a real (headless) browser; make screenshot
  slurmctld slurmd slurm-client munge  # tests: deploy/slurm on a real two-node Slurm
  iproute2  # tests: three hosts in network namespaces (ip netns, veth, bridge)
  yamllint shellcheck systemd  # tests: deploy/'s manifests, scripts and units (systemd-analyze)
  openssl  # tests: deploy/tls/make_test_ca.sh makes the mutual-TLS test certificates
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

install_missing() {
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup: all ${#PACKAGES[@]} Debian packages present"
    return
  fi

  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

  if [[ ! -d /usr/local/cuda/include ]]; then
    echo "setup: note: no CUDA toolkit at /usr/local/cuda; the injector builds in NVTX-only mode" \
         "once NVTX headers are found, otherwise the build stops with a clear message" >&2
  fi
}

install_missing
[[ "$SET" == build ]] || bash "$(dirname "$0")/setup_torch2.sh"
# DeepSpeed and transformers beside Debian's torch 1.13: no time once made, about 80 s before.
[[ "$SET" == build ]] || bash "$(dirname "$0")/setup_torch_env.sh" torch1
