#!/usr/bin/env bash
# The torch 2 test environment: a virtual environment of Debian's /usr/bin/python3 holding the
# PyTorch 2.x release and what the tests need beside it, exactly as requirements/torch2.txt pins
# them (every package, dependencies included, by version and sha256). The tests run every torch
# test on Debian's torch 1.13 and again in this environment (docs/testing.md).
#
#   scripts/setup_torch2.sh           make or find it; .venv/torch2 in the tree points at it
#   scripts/setup_torch2.sh --relock  resolve requirements/torch2.in anew into torch2.txt
#
# Called by scripts/setup_deps.sh (the `test` set, so by `make test`). Where it lives:
#   $FLOPSCOPE_CACHE_DIR (default ~/.cache/flopscope)/venvs/torch2-<hash of torch2.txt>/
#   $FLOPSCOPE_CACHE_DIR/wheels/    the wheels it was installed from (pip's own cache is not
#                                   relied on: it kept none of these files here)
# One environment per lock, shared by every clone of the repository: a fresh clone on a machine
# that has it links it and is done; a new lock installs from the wheels already there and
# downloads only what changed (a fresh machine: about 2.9 GB). Older environments and wheels no
# lock names are removed. FLOPSCOPE_TORCH2=0 skips all of it (the torch 2 tests then skip,
# saying why).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly PYTHON=/usr/bin/python3  # Debian's: the one _native is built for, python3-venv's
readonly IN=requirements/torch2.in LOCK=requirements/torch2.txt BUILT=requirements/torch2-built.txt
readonly LINK=.venv/torch2
readonly CACHE=${FLOPSCOPE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flopscope}
readonly WHEELS=$CACHE/wheels
# pip's network bounds: a dead registry fails the setup within minutes, not hours.
readonly PIP_NET=(--timeout 60 --retries 3)

say() { echo "setup: torch 2: $*"; }

scratch=""
# name==version of a wheel or sdist file name, the name normalised as pip writes it.
pin_of() {
  "$PYTHON" - "$@" <<'PY'
import re, sys
for path in sys.argv[1:]:
    file = path.rsplit("/", 1)[-1]
    if file.endswith(".whl"):
        name, version = file.split("-")[:2]
    else:  # an sdist: NAME-VERSION.tar.gz
        name, version = file[:-len(".tar.gz")].rsplit("-", 1)
    print(f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}")
PY
}

relock() {
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$PYTHON" -m venv "$scratch/venv"
  # Wheels wherever one is served; a package that ships none (DeepSpeed) comes as its sdist.
  "$scratch/venv/bin/pip" download -q "${PIP_NET[@]}" --prefer-binary -d "$scratch/files" -r "$IN"
  local header="# Made by scripts/setup_torch2.sh --relock from torch2.in, for CPython 3.11 on x86_64
# Linux (Debian 12's /usr/bin/python3). Edit torch2.in, not this file."
  local file
  {
    echo "$header"
    echo "# Every wheel the torch 2 test environment installs (pip install --no-deps --require-hashes)."
    for file in "$scratch"/files/*.whl; do
      echo "$(pin_of "$file") --hash=sha256:$(sha256sum "$file" | cut -d' ' -f1)"
    done | sort
  } >"$LOCK"
  {
    echo "$header"
    echo "# The packages served only as source, built into wheels on install, after torch2.txt's."
    for file in "$scratch"/files/*.tar.gz; do
      [[ -e "$file" ]] || continue
      echo "$(pin_of "$file") --hash=sha256:$(sha256sum "$file" | cut -d' ' -f1)"
    done | sort
  } >"$BUILT"
  say "wrote $LOCK ($(grep -vc '^#' "$LOCK") wheels) and $BUILT ($(grep -vc '^#' "$BUILT"))"
}

install() {
  local venv=$1 pip=$1/bin/pip
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  local offline=(--no-index --find-links "$WHEELS" --no-deps --require-hashes -q)
  if ! "$pip" install "${offline[@]}" -r "$LOCK" 2>/dev/null; then
    say "downloading what $WHEELS lacks"
    mkdir -p "$WHEELS"
    "$pip" download -q "${PIP_NET[@]}" --no-deps --require-hashes -d "$WHEELS" -r "$LOCK" -r "$BUILT"
    "$pip" install "${offline[@]}" -r "$LOCK"
  fi
  # Built with what the environment now holds (its setuptools, torch beside it), as a user's
  # `pip install deepspeed` after torch does.
  if grep -q '^[^#]' "$BUILT"; then
    "$pip" install "${offline[@]}" --no-build-isolation --use-pep517 -r "$BUILT"
  fi
  "$venv/bin/python" -c 'import torch, numpy, grpc, google.protobuf
x = torch.randn(2, 2)
assert (x @ torch.eye(2)).allclose(x)'
  touch "$venv/.complete"
}

# Files of $WHEELS no line of the locks names (an older torch, say): removed.
prune_wheels() {
  local file
  for file in "$WHEELS"/*.whl "$WHEELS"/*.tar.gz; do
    [[ -e "$file" ]] || continue
    grep -q "^$(pin_of "$file") " "$LOCK" "$BUILT" || rm -f "$file"
  done
}

main() {
  if [[ "${1:-}" == --relock ]]; then
    relock
    return
  fi
  if [[ "${FLOPSCOPE_TORCH2:-1}" == 0 ]]; then
    say "skipped (FLOPSCOPE_TORCH2=0): the torch 2 tests will skip"
    return
  fi
  local hash venv started
  hash=$(cat "$LOCK" "$BUILT" | sha256sum | cut -c1-12)
  venv=$CACHE/venvs/torch2-$hash
  mkdir -p "$CACHE/venvs" "$(dirname "$LINK")"
  exec 9>"$CACHE/venvs/.lock"
  flock 9  # another clone's setup may be making the same environment
  if [[ ! -e "$venv/.complete" ]]; then
    started=$SECONDS
    say "installing $LOCK into $venv"
    install "$venv"
    prune_wheels
    local old
    for old in "$CACHE"/venvs/torch2-*; do
      [[ "$old" == "$venv" ]] || rm -rf "$old"
    done
    say "installed in $((SECONDS - started)) s ($(du -sh "$venv" | cut -f1) on disk)"
  fi
  if [[ -e "$LINK" && ! -L "$LINK" ]]; then
    echo "setup: torch 2: $LINK is not a link: move it away" >&2
    return 1
  fi
  ln -sfn "$venv" "$LINK"
  say "$(grep -h '^torch==' "$LOCK" | cut -d' ' -f1) in $LINK"
}

main "$@"
