#!/usr/bin/env bash
# Regenerates docs/images/report.png, the README's picture of the HTML report: runs `make demo`'s
# job (scripts/demo.sh writes BUILD_DIR/demo-report.html) and photographs the page with Debian's
# headless Chromium, kept off the network.
#
#   scripts/screenshot.sh BUILD_DIR        (make screenshot runs it on ./build)
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
BUILD_DIR=$(cd "$1" && pwd)
readonly SOURCE_DIR=$(cd "$(dirname "$0")/.." && pwd)
readonly PAGE=$BUILD_DIR/demo-report.html
readonly IMAGE=$SOURCE_DIR/docs/images/report.png
command -v chromium >/dev/null ||
  { echo "screenshot: chromium is missing (scripts/setup_deps.sh test installs it)" >&2; exit 1; }

bash "$SOURCE_DIR/scripts/demo.sh" "$BUILD_DIR" >/dev/null
[[ -s $PAGE ]] || { echo "screenshot: the demo wrote no $PAGE" >&2; exit 1; }

PROFILE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/flopscope-chromium.XXXXXX")
trap 'rm -rf "$PROFILE_DIR"' EXIT
SANDBOX=()
[[ $(id -u) -ne 0 ]] || SANDBOX=(--no-sandbox)  # Chromium refuses root with its sandbox
mkdir -p "$(dirname "$IMAGE")"
chromium --headless --disable-gpu --no-first-run --no-default-browser-check \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-default-apps --disable-extensions --hide-scrollbars \
  --host-resolver-rules='MAP * ~NOTFOUND' --proxy-server=127.0.0.1:9 \
  --user-data-dir="$PROFILE_DIR" "${SANDBOX[@]}" --window-size=1280,1960 \
  --screenshot="$IMAGE" "file://$PAGE" 2>/dev/null
echo "screenshot: wrote $IMAGE"
