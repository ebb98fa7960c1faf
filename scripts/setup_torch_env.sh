#!/usr/bin/env bash
# The torch test environments: virtual environments of Debian's /usr/bin/python3 holding what the
# tests need beside a torch, exactly as requirements/NAME.txt pins it (every package, dependencies
# included, by version and sha256). The tests run every torch test in both (docs/testing.md):
#
#   torch2  the PyTorch 2.x release from PyPI, DeepSpeed, transformers and torchvision beside it
#   torch1  Debian's torch 1.13, numpy and torchvision (python3-torch, python3-numpy,
#           python3-torchvision: seen through --system-site-packages, never reinstalled), with the
#           newest DeepSpeed and transformers that run on them
#
#   scripts/setup_torch_env.sh NAME           make or find it; .venv/NAME in the tree points at it
#   scripts/setup_torch_env.sh NAME --relock  resolve requirements/NAME.in anew into NAME.txt
#
# Called by scripts/setup_deps.sh (the `test` set, so by `make test`). Where they live:
#   $FLOPSCOPE_CACHE_DIR (default ~/.cache/flopscope)/venvs/NAME-<hash of NAME.txt>/
#   $FLOPSCOPE_CACHE_DIR/wheels/    the wheels they were installed from, one folder for all of
#                                   them (pip's own cache is not relied on: it kept none here)
# One environment per lock, shared by every clone of the repository: a fresh clone on a machine
# that has it links it and is done; a new lock installs from the wheels already there and
# downloads only what changed (torch2 on a fresh machine: about 2.9 GB). Older environments of
# the name and wheels no lock names are removed. FLOPSCOPE_TORCH2=0 (FLOPSCOPE_TORCH1=0) skips all
# of it for that environment (its tests then skip, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly NAME=${1:-}
# Debian's packages an environment uses as they are (through --system-site-packages): the lock
# resolves with them counted as installed, and never names them.
case "$NAME" in
  torch2) DEBIAN=() ;;
  torch1) DEBIAN=(torch numpy torchvision) ;;
  *) echo "usage: $0 torch2|torch1 [--relock]" >&2; exit 2 ;;
esac
readonly DEBIAN
readonly PYTHON=/usr/bin/python3  # Debian's: the one _native is built for, python3-venv's
readonly IN=requirements/$NAME.in LOCK=requirements/$NAME.txt BUILT=requirements/$NAME-built.txt
readonly LINK=.venv/$NAME
readonly CACHE=${FLOPSCOPE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flopscope}
readonly WHEELS=$CACHE/wheels
# pip's network bounds: a dead registry fails the setup within minutes, not hours.
readonly PIP_NET=(--timeout 60 --retries 3)
VENV_ARGS=()
[[ ${#DEBIAN[@]} -eq 0 ]] || VENV_ARGS=(--system-site-packages)
readonly VENV_ARGS

say() { echo "setup: $NAME: $*"; }

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

# Resolves $IN as pip would install it into a fresh environment (with Debian's $DEBIAN counted
# as installed: a scratch environment holds their metadata alone) and writes the locks from
# pip's report: each file pip picked, by version and the index's sha256.
relock() {
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$PYTHON" -m venv "$scratch/venv"
  local resolve=(--dry-run --prefer-binary --report "$scratch/report.json" -q "${PIP_NET[@]}")
  if [[ ${#DEBIAN[@]} -eq 0 ]]; then
    resolve+=(--ignore-installed)  # pip and setuptools of the scratch venv count for nothing
  else
    "$PYTHON" - "$("$scratch/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
        "${DEBIAN[@]}" <<'PY'
import importlib.metadata, shutil, sys
site, names = sys.argv[1], sys.argv[2:]
for name in names:
    path = importlib.metadata.distribution(name)._path  # its .egg-info or .dist-info
    shutil.copytree(path, f"{site}/{path.name}")
PY
  fi
  # Wheels wherever one is served; a package that ships none (DeepSpeed) comes as its sdist.
  "$scratch/venv/bin/pip" install "${resolve[@]}" -r "$IN"
  "$PYTHON" - "$scratch/report.json" "$LOCK" "$BUILT" "$NAME" <<'PY'
import json, re, sys
report, lock, built, name = sys.argv[1:]
header = (f"# Made by scripts/setup_torch_env.sh {name} --relock from {name}.in, for CPython 3.11 on"
          f" x86_64\n# Linux (Debian 12's /usr/bin/python3). Edit {name}.in, not this file.\n")
wheels, sources = [], []
for item in json.load(open(report, encoding="utf-8"))["install"]:
    url = item["download_info"]["url"]
    digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
    pin = re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower()
    (wheels if url.endswith(".whl") else sources).append(
        f"{pin}=={item['metadata']['version']} --hash=sha256:{digest}")
with open(lock, "w", encoding="utf-8") as out:
    out.write(header + f"# Every wheel the {name} test environment installs"
              " (pip install --no-deps --require-hashes).\n")
    out.writelines(f"{line}\n" for line in sorted(wheels))
with open(built, "w", encoding="utf-8") as out:
    out.write(header + f"# The packages served only as source, built into wheels on install, after"
              f" {name}.txt's.\n")
    out.writelines(f"{line}\n" for line in sorted(sources))
PY
  say "wrote $LOCK ($(grep -vc '^#' "$LOCK") wheels) and $BUILT ($(grep -vc '^#' "$BUILT" || true))"
}

install() {
  local venv=$1 pip=$1/bin/pip
  rm -rf "$venv"
  "$PYTHON" -m venv "${VENV_ARGS[@]}" "$venv"
  local offline=(--no-index --find-links "$WHEELS" --no-deps --require-hashes -q)
  # Every package of the lock goes into the environment, also where Debian has the same version.
  [[ ${#DEBIAN[@]} -eq 0 ]] || offline+=(--ignore-installed)
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
  "$venv/bin/python" - "${DEBIAN[@]}" <<'PY'
import importlib, sys
import torch, numpy, grpc, google.protobuf
x = torch.randn(2, 2)
assert (x @ torch.eye(2)).allclose(x)
for name in sys.argv[1:]:
    where = importlib.import_module(name).__file__
    assert where.startswith("/usr/lib/python3/dist-packages/"), f"{name} is {where}, not Debian's"
PY
  touch "$venv/.complete"
}

# Files of $WHEELS no line of any environment's locks names (an older torch, say): removed.
prune_wheels() {
  local file
  for file in "$WHEELS"/*.whl "$WHEELS"/*.tar.gz; do
    [[ -e "$file" ]] || continue
    grep -q "^$(pin_of "$file") " requirements/*.txt || rm -f "$file"
  done
}

main() {
  if [[ "${2:-}" == --relock ]]; then
    relock
    return
  fi
  local skip=FLOPSCOPE_${NAME^^}
  if [[ "${!skip:-1}" == 0 ]]; then
    say "skipped ($skip=0): the tests on it will skip"
    return
  fi
  local hash venv started
  hash=$(cat "$LOCK" "$BUILT" | sha256sum | cut -c1-12)
  venv=$CACHE/venvs/$NAME-$hash
  mkdir -p "$CACHE/venvs" "$(dirname "$LINK")"
  exec 9>"$CACHE/venvs/.lock"
  flock 9  # another clone's setup may be making the same environment
  if [[ ! -e "$venv/.complete" ]]; then
    started=$SECONDS
    say "installing $LOCK into $venv"
    install "$venv"
    prune_wheels
    local old
    for old in "$CACHE/venvs/$NAME"-*; do
      [[ "$old" == "$venv" ]] || rm -rf "$old"
    done
    say "installed in $((SECONDS - started)) s ($(du -sh "$venv" | cut -f1) on disk)"
  fi
  if [[ -e "$LINK" && ! -L "$LINK" ]]; then
    echo "setup: $NAME: $LINK is not a link: move it away" >&2
    return 1
  fi
  ln -sfn "$venv" "$LINK"
  local torch
  torch=$(grep -h '^torch==' "$LOCK" | cut -d' ' -f1 || true)
  [[ -n "$torch" ]] || torch="Debian's python3-torch $(dpkg-query -W -f='${Version}' python3-torch)"
  say "$torch in $LINK"
}

main "$@"
