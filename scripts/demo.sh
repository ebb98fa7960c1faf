#!/usr/bin/env bash
# flopscope demo: a private daemon, a two-rank job under `flopscope run`, then its report.
#
#   scripts/demo.sh BUILD_DIR        (make demo runs it on ./build)
#
# Everything lives in a fresh temporary directory (socket, data, logs) that is removed on exit,
# and the daemon is stopped with SIGTERM whether the demo succeeds or fails.
set -euo pipefail

readonly STEPS=${DEMO_STEPS:-3}
readonly LAYERS=${DEMO_LAYERS:-2}
# A model small enough that the CPU backend computes every product in full, so the FLOPs the
# example announces from its shapes (labelled estimated) are the work it does and the FLOPS are
# real. tests/integration/test_report_schema.py reads this line.
readonly MODEL_FLAGS=(--batch 2 --seq 16 --hidden 32 --vocab 128)
readonly JOB=demo

if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
say() { printf '%sdemo:%s %s\n' "$BOLD" "$PLAIN" "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
BUILD_DIR=$(cd "$1" 2>/dev/null && pwd) || die "build directory '$1' does not exist (build first: make build)"
readonly FLOPSCOPED=$BUILD_DIR/bin/flopscoped
readonly FLOPSCOPE=$BUILD_DIR/bin/flopscope
readonly EXAMPLE=$BUILD_DIR/bin/transformer_nvtx
readonly INJECTOR=$BUILD_DIR/lib/libflopscope_inject.so
for file in "$FLOPSCOPED" "$FLOPSCOPE" "$EXAMPLE" "$INJECTOR"; do
  [[ -e $file ]] || die "$file is missing (build it first: cmake --build $BUILD_DIR)"
done

WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/flopscope-demo.XXXXXX")
readonly WORK_DIR
readonly SOCKET=$WORK_DIR/flopscope.sock
readonly DATA_DIR=$WORK_DIR/data
readonly DAEMON_LOG=$WORK_DIR/flopscoped.log
DAEMON_PID=""

cleanup() {
  local status=$?
  # Output may be gone (demo.sh | head): keep going on write errors, stop the daemon, clean up.
  set +e
  trap '' PIPE
  if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    say "stopping flopscoped (pid $DAEMON_PID)"
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    # Give it the few seconds it needs to drain and close its stores, then insist.
    for _ in $(seq 50); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
  if [[ $status -ne 0 && -s $DAEMON_LOG ]]; then
    echo "--- last lines of the daemon log ($DAEMON_LOG) ---" >&2
    tail -n 20 "$DAEMON_LOG" >&2
  fi
  rm -rf "$WORK_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM

mkdir -p "$DATA_DIR"
say "starting flopscoped on $SOCKET (data in $DATA_DIR)"
"$FLOPSCOPED" --socket "$SOCKET" --data-dir "$DATA_DIR" >"$DAEMON_LOG" 2>&1 &
DAEMON_PID=$!

say "waiting for flopscoped to serve"
for attempt in $(seq 100); do
  if "$FLOPSCOPE" jobs --socket "$SOCKET" >/dev/null 2>&1; then break; fi
  kill -0 "$DAEMON_PID" 2>/dev/null || die "flopscoped exited before it served"
  [[ $attempt -lt 100 ]] || die "flopscoped did not answer within 10 s"
  sleep 0.1
done

say "running transformer_nvtx as 2 ranks ($STEPS steps, $LAYERS layers) under flopscope run"
RANK_PIDS=()
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank \
    "$FLOPSCOPE" run --job "$JOB" --socket "$SOCKET" -- \
    "$EXAMPLE" --steps "$STEPS" --layers "$LAYERS" "${MODEL_FLAGS[@]}" >"$WORK_DIR/rank$rank.log" 2>&1 &
  RANK_PIDS+=($!)
done
failed=0
for rank in 0 1; do
  if wait "${RANK_PIDS[$rank]}"; then
    say "rank $rank: $(tail -n 1 "$WORK_DIR/rank$rank.log")"
  else
    failed=1
    echo "--- rank $rank failed; its output: ---" >&2
    cat "$WORK_DIR/rank$rank.log" >&2
  fi
done
[[ $failed -eq 0 ]] || die "a rank of the job failed"

say "flopscope report $JOB"
echo
# The ranks deliver their last batch as they exit; allow the daemon a moment to commit it.
for attempt in $(seq 50); do
  if report=$("$FLOPSCOPE" report "$JOB" --socket "$SOCKET" 2>"$WORK_DIR/report.err"); then
    printf '%s\n' "$report"
    break
  fi
  [[ $attempt -lt 50 ]] || { cat "$WORK_DIR/report.err" >&2; die "no report for job $JOB"; }
  sleep 0.1
done
echo
# The same report as one self-contained page of charts (README: "The HTML report").
readonly HTML_REPORT=$BUILD_DIR/demo-report.html
"$FLOPSCOPE" report "$JOB" --socket "$SOCKET" --format html -o "$HTML_REPORT"
say "HTML report: $HTML_REPORT (open it in a browser: xdg-open $HTML_REPORT)"
say "done (the JSON form: flopscope report $JOB --format json)"
