#!/usr/bin/env bash
# The GPU acceptance in one command (docs/gpu-acceptance.md):
#
#   tests/gpu/acceptance.sh BUNDLE      BUNDLE: the `make dist` tarball, or the folder it unpacks to
#
# Needs only the bundle, nvcc, ncu and python3 (with torch for the torch rows) on an x86-64 Linux
# node; finishes within FLOPSCOPE_ACCEPTANCE_BUDGET_S (default 540 s): a step that would not fit
# is SKIPPED with that reason. Writes everything to $OUT when set, else ./acceptance-out:
#
#   summary.txt       the table: one row per check, PASS, FAIL or SKIPPED with the reason
#   summary.tsv       the same rows, tab-separated
#   logs/             stdout+stderr of every command, the daemon's log, ncu's CSV, reports;
#                     logs/ranks/: copies of the GPU jobs' rank files (flops, torch-*)
#   recording/        what the injector recorded of one counted run (FLOPSCOPE_RECORD_DIR):
#                     commit it under tests/data/gpu/<device>/
#   acceptance.tar.gz all of the above in one file (the device tool brings back 8 files at most;
#                     with FLOPSCOPE_ACCEPTANCE_PACK_ONLY=1 the loose files are removed)
#
# Without a GPU (no nvidia-smi, or it lists no device) every GPU row is SKIPPED with the reason,
# the CPU rows still run (the bundle loads, the daemon serves, the client answers, `counters
# --chip GH100` plans, a CPU torch job is recorded) and the script exits 0 unless one of them
# fails. Exit status: 0 when no row FAILed, 1 otherwise, 2 on bad usage.
set -uo pipefail

usage() { echo "usage: $0 BUNDLE (flopscope-*.tar.gz or its unpacked folder)" >&2; exit 2; }
[[ $# -eq 1 && -e "$1" ]] || usage

OUT=$(mkdir -p "${OUT:-$PWD/acceptance-out}" && cd "${OUT:-$PWD/acceptance-out}" && pwd)
PYTHON=${PYTHON:-python3}
BUDGET_S=${FLOPSCOPE_ACCEPTANCE_BUDGET_S:-540}
LOGS="$OUT/logs"
SUMMARY_TSV="$OUT/summary.tsv"
WORK=$(mktemp -d /tmp/flopscope-acceptance.XXXXXX)
DAEMON_PID=""
mkdir -p "$LOGS"
: > "$SUMMARY_TSV"

# ---- bookkeeping ----
row() {  # NAME STATUS DETAIL (tabs and newlines in DETAIL become spaces)
  local detail=${3//$'\t'/ }
  detail=${detail//$'\n'/ }
  printf '%s\t%s\t%s\n' "$1" "$2" "$detail" >> "$SUMMARY_TSV"
  echo "acceptance: $1: $2${detail:+ ($detail)}"
}
seconds_left() { echo $((BUDGET_S - SECONDS)); }
# Prints the time a step may take: its wish, or what is left minus a reserve for the summary.
step_limit() {
  local left=$(($(seconds_left) - 15))
  left=$((left < $1 ? left : $1))
  echo $((left < 1 ? 1 : left))
}
fits() { (($(seconds_left) - 15 >= $1)); }
last_line() { tail -n 1 "$1" 2>/dev/null | cut -c1-300; }
# Runs a command with its output in logs/NAME.log under a time limit; its exit status.
logged() {  # NAME SECONDS CMD...
  local name=$1 limit=$2; shift 2
  echo "+ $*" > "$LOGS/$name.log"
  timeout --kill-after=10 "$limit" "$@" >> "$LOGS/$name.log" 2>&1
}
# The same for a command whose stdout is a JSON document: logs/NAME.json, stderr in NAME.log.
json_logged() {  # NAME SECONDS CMD...
  local name=$1 limit=$2; shift 2
  echo "+ $*" > "$LOGS/$name.log"
  timeout --kill-after=10 "$limit" "$@" > "$LOGS/$name.json" 2>> "$LOGS/$name.log"
}
# acceptance_checks.py of the bundle (CHECKS is set once the bundle is unpacked).
CHECKS=()
checks() { "${CHECKS[@]}" "$@"; }
cleanup() {
  [[ -n "$DAEMON_PID" ]] && kill "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the bundle ----
unpack_bundle() {
  if [[ -d "$1" ]]; then
    BUNDLE=$(cd "$1" && pwd)
  else
    tar -C "$WORK" -xzf "$1" || return 1
    BUNDLE=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d -name 'flopscope-*' | head -1)
  fi
  [[ -x "$BUNDLE/bin/flopscope" && -x "$BUNDLE/bin/flopscoped" ]]
}

check_bundle() {
  if ! unpack_bundle "$1"; then
    row bundle FAIL "cannot unpack $1 or it has no bin/flopscope and bin/flopscoped"
    return 1
  fi
  FS="$BUNDLE/bin/flopscope"
  SHARE="$BUNDLE/share/flopscope"
  CHECKS=("$PYTHON" "$SHARE/tests/gpu/acceptance_checks.py")
  local missing=""
  command -v ldd > /dev/null &&
    missing=$(ldd "$BUNDLE"/bin/* "$BUNDLE"/lib/*.so* 2>&1 | grep 'not found' | sort -u | head -3)
  if [[ -n "$missing" ]]; then
    row bundle FAIL "unresolved libraries: $(echo $missing)"
    return 1
  fi
  if ! logged version 30 "$FS" --version; then
    row bundle FAIL "flopscope --version failed: $(last_line "$LOGS/version.log")"
    return 1
  fi
  row bundle PASS "$(last_line "$LOGS/version.log"), needs glibc >= $(cat "$SHARE/GLIBC_MINIMUM" 2>/dev/null), node: $(uname -m) glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | grep -o '[0-9.]*$')"
}

# libcupti is not in the bundle. FLOPSCOPE_CUPTI_PATH when the caller set it; else the loader's
# (ld.so.cache) or a toolkit's for the CUDA programs, and for torch jobs first the copy of the CUDA
# wheels beside torch, which torch itself loads (one libcupti per process: D9 in gpu-review.md).
toolkit_cupti() {
  local found
  found=$(ldconfig -p 2>/dev/null | awk '/libcupti\.so\.13 / { print $NF; exit }')
  [[ -n "$found" ]] && { echo "$found"; return; }
  for found in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13* /usr/local/cuda/lib64/libcupti.so.13* \
               /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13* /usr/local/cuda/lib/libcupti.so.13* \
               /usr/local/cuda-13*/extras/CUPTI/lib64/libcupti.so.13*; do
    [[ -f "$found" ]] && { echo "$found"; return; }
  done
}
wheel_cupti() {
  "$PYTHON" - <<'EOF' 2>/dev/null
import glob, os, site
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", "libcupti.so.13*"))):
        print(path)
        raise SystemExit(0)
EOF
}
choose_cupti() {
  if [[ -n "${FLOPSCOPE_CUPTI_PATH:-}" ]]; then
    CUPTI_FOR_CUDA=$FLOPSCOPE_CUPTI_PATH CUPTI_FOR_TORCH=$FLOPSCOPE_CUPTI_PATH
    return
  fi
  local toolkit wheel
  toolkit=$(toolkit_cupti)
  wheel=$(wheel_cupti)
  CUPTI_FOR_CUDA=${toolkit:-$wheel}
  CUPTI_FOR_TORCH=${wheel:-$toolkit}
  [[ -n "$CUPTI_FOR_CUDA" ]] && export FLOPSCOPE_CUPTI_PATH=$CUPTI_FOR_CUDA
}

# ---- daemon and client ----
start_daemon() {
  SOCKET="$WORK/fs.sock"
  DATA="$WORK/data"
  "$BUNDLE/bin/flopscoped" --socket "$SOCKET" --data-dir "$DATA" > "$LOGS/flopscoped.log" 2>&1 &
  DAEMON_PID=$!
  local tries
  for tries in $(seq 200); do
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
      row daemon FAIL "flopscoped exited: $(last_line "$LOGS/flopscoped.log")"
      DAEMON_PID=""
      return 1
    fi
    if [[ -S "$SOCKET" ]] && "$FS" jobs --socket "$SOCKET" > "$LOGS/client-jobs.log" 2>&1; then
      row daemon PASS "serving on $SOCKET after $((tries * 50)) ms"
      row client PASS "flopscope jobs answered"
      return 0
    fi
    sleep 0.05
  done
  row daemon FAIL "no answer on $SOCKET within 10 s: $(last_line "$LOGS/flopscoped.log")"
  return 1
}

check_counters_plan() {  # CHIP
  if json_logged "counters-$1" 60 "$FS" counters --chip "$1" --format json &&
     logged "counters-$1-check" 30 "${CHECKS[@]}" counters-plan "$LOGS/counters-$1.json"; then
    row "counters-$1" PASS "$(last_line "$LOGS/counters-$1-check.log")"
  else
    row "counters-$1" FAIL "$(last_line "$LOGS/counters-$1.log") $(last_line "$LOGS/counters-$1-check.log")"
    return 1
  fi
}

# A CPU torch job under `flopscope run --torch`: the bundle's python hooks and NVTX shim.
check_cpu_torch_job() {
  if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    row torch-cpu-job SKIPPED "$PYTHON has no torch"
    return
  fi
  if ! fits 120; then row torch-cpu-job SKIPPED "time budget spent"; return; fi
  if logged torch-cpu-job "$(step_limit 120)" env FLOPSCOPE_CUPTI_PATH="$CUPTI_FOR_TORCH" "$FS" run --torch --job torch-cpu --socket "$SOCKET" -- \
       "$PYTHON" "$SHARE/tests/gpu/torch_model_job.py" --device cpu --steps 4 --width 64 \
       --layers 1 --seq 16 --vocab 256 --batch 2 --out "$LOGS/torch-cpu-steps.json" &&
     json_logged torch-cpu-report 60 "$FS" report torch-cpu --socket "$SOCKET" --format json &&
     logged torch-cpu-check 30 "${CHECKS[@]}" modules-report "$LOGS/torch-cpu-report.json" 4; then
    row torch-cpu-job PASS "$(last_line "$LOGS/torch-cpu-check.log")"
  else
    row torch-cpu-job FAIL "$(last_line "$LOGS/torch-cpu-job.log") $(last_line "$LOGS/torch-cpu-check.log")"
  fi
}

# ---- GPU ----
GPU_ROWS=(nvcc-build gpu-tests-kernels gpu-tests-flops ncu-compare torch-gpu-job torch-after-window
          overhead recording)

gpu_present() {
  if ! command -v nvidia-smi > /dev/null; then
    NO_GPU="no nvidia-smi on this machine"
  elif ! nvidia-smi -L > "$LOGS/nvidia-smi.log" 2>&1 || ! grep -q '^GPU ' "$LOGS/nvidia-smi.log"; then
    NO_GPU="nvidia-smi lists no GPU: $(last_line "$LOGS/nvidia-smi.log")"
  else
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv > "$LOGS/device.csv" 2>&1
    nvidia-smi -q > "$LOGS/nvidia-smi-q.log" 2>&1
    return 0
  fi
  return 1
}

build_gpu_programs() {
  TREE="$WORK/tree"  # the layout tests/integration/harness.py expects of a build folder
  mkdir -p "$TREE/tests"
  ln -sfn "$BUNDLE/bin" "$TREE/bin"
  ln -sfn "$BUNDLE/lib" "$TREE/lib"
  if ! command -v nvcc > /dev/null; then row nvcc-build FAIL "no nvcc on PATH"; return 1; fi
  # cuBLAS is found at run time through an RPATH to the toolkit nvcc belongs to.
  local source program ok=1 cuda_home rpath=()
  cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  for source in lib64 targets/x86_64-linux/lib lib; do
    [[ -d "$cuda_home/$source" ]] && rpath+=(-Xlinker -rpath -Xlinker "$cuda_home/$source")
  done
  for source in kernel_workload flop_workload; do
    program="$TREE/tests/gpu_$source"
    logged "nvcc-$source" "$(step_limit 180)" nvcc -std=c++17 -O2 "-arch=${NVCC_ARCH:-native}" \
      -o "$program" "$SHARE/tests/gpu/$source.cu" -lcublas -ldl -lpthread "${rpath[@]}" || ok=0
  done
  if ((ok)); then
    row nvcc-build PASS "$(nvcc --version | tail -1)"
  else
    row nvcc-build FAIL "$(last_line "$LOGS/nvcc-kernel_workload.log") $(last_line "$LOGS/nvcc-flop_workload.log")"
    return 1
  fi
}

# One tests/gpu test through its own entry point (gpu_main.py): 0 pass, 77 skip, else fail.
run_gpu_test() {  # ROW SCRIPT SECONDS [ENV=VALUE...]
  local name=$1 script=$2 wish=$3; shift 3
  if ! fits 60; then row "$name" SKIPPED "time budget spent"; return; fi
  logged "$name" "$(step_limit "$wish")" env "$@" FLOPSCOPE_BUILD_DIR="$TREE" \
    PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$SHARE/tests/gpu/$script"
  case $? in
    0) row "$name" PASS "$(grep -E '^(replay cost|Ran )' "$LOGS/$name.log" | tr '\n' ' ')" ;;
    77) row "$name" SKIPPED "$(grep -m1 'skipped' "$LOGS/$name.log")" ;;
    124|137) row "$name" FAIL "timed out" ;;
    *) row "$name" FAIL "$(grep -E -m2 'Error|FAIL|failed' "$LOGS/$name.log" | tr '\n' ' ')" ;;
  esac
}

# flop_workload under the acceptance's daemon with a counter window, recorded; then the same
# program under ncu with flopscope's metric names, compared kernel by kernel.
compare_with_ncu() {
  local chip=$1 metrics
  if ! fits 120; then row ncu-compare SKIPPED "time budget spent"; row recording SKIPPED "time budget spent"; return; fi
  mkdir -p "$OUT/recording"
  # 16 ranges (the 10 launches of the window fit): the recorded counter data image stays ~9 MB
  # (GH100, full set: ~560 KB a range), small enough to commit for replay.
  if ! logged flops-job "$(step_limit 240)" env FLOPSCOPE_COUNTERS=steps=1:2,set=full FLOPSCOPE_COUNTER_RANGES=16 \
         FLOPSCOPE_RECORD_DIR="$OUT/recording" FLOPSCOPE_EXIT_TIMEOUT_MS=10000 \
         "$FS" run --job flops --socket "$SOCKET" -- "$TREE/tests/gpu_flop_workload" "$LOGS/flops-expect.json"; then
    row ncu-compare FAIL "flop_workload under flopscope failed: $(last_line "$LOGS/flops-job.log")"
  fi
  # The window records, loss counters (kernels.launch_not_seen) and rank status, for the record.
  json_logged flops-report 60 "$FS" report flops --socket "$SOCKET" --format json
  logged flops-report-text 60 "$FS" report flops --socket "$SOCKET"
  if [[ -n "$(ls -A "$OUT/recording" 2>/dev/null)" ]]; then
    row recording PASS "$(du -sh "$OUT/recording" | cut -f1) in recording/: commit it under tests/data/gpu/$(device_slug)/"
  else
    row recording FAIL "FLOPSCOPE_RECORD_DIR=$OUT/recording stayed empty"
  fi
  if grep -q $'^ncu-compare\tFAIL' "$SUMMARY_TSV"; then return; fi
  if ! command -v ncu > /dev/null; then row ncu-compare SKIPPED "no ncu on PATH"; return; fi
  if [[ ! -s "$LOGS/counters-$chip.json" ]]; then row ncu-compare FAIL "no metric list for $chip"; return; fi
  metrics=$(checks flop-metrics "$LOGS/counters-$chip.json")
  logged ncu "$(step_limit 240)" ncu --metrics "$metrics" --csv --page raw --print-units base \
    --print-kernel-base mangled --clock-control none --log-file "$LOGS/ncu.csv" \
    "$TREE/tests/gpu_flop_workload" "$WORK/ncu-expect.json"
  local status=$?
  if grep -q 'ERR_NVGPUCTRPERM' "$LOGS/ncu.log" "$LOGS/ncu.csv" 2>/dev/null; then
    row ncu-compare SKIPPED "ncu: performance counters are restricted to administrators (ERR_NVGPUCTRPERM)"
    return
  fi
  if ((status != 0)); then row ncu-compare FAIL "ncu exit $status: $(last_line "$LOGS/ncu.log")"; return; fi
  json_logged flopscope-kernels 60 "${CHECKS[@]}" flopscope-kernels "$DATA/jobs/flops/rank-00000.sqlite"
  if logged ncu-compare 60 "${CHECKS[@]}" ncu-compare \
       "$LOGS/counters-$chip.json" "$LOGS/ncu.csv" "$LOGS/flopscope-kernels.json"; then
    row ncu-compare PASS "$(last_line "$LOGS/ncu-compare.log")"
  else
    row ncu-compare FAIL "$(last_line "$LOGS/ncu-compare.log")"
  fi
}

device_slug() {
  head -2 "$LOGS/device.csv" 2>/dev/null | tail -1 | cut -d, -f1 | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-'
}

# torch's TransformerEncoder on the GPU: without the injector, with timing-only tracing, and with
# a counter window on step 10; the last one's report; the overheads. One counted step: on the H200
# a counted step of this model took 49-83 s of kernel replay (2026-11-26), the base and timing-only
# runs ~15 s each.
torch_gpu_jobs() {
  local job=(--steps 30) model="$SHARE/tests/gpu/torch_model_job.py"
  if ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2> "$LOGS/torch-probe.log"; then
    row torch-gpu-job SKIPPED "$PYTHON has no torch with CUDA: $(last_line "$LOGS/torch-probe.log")"
    row torch-after-window SKIPPED "no torch with CUDA"
    row overhead SKIPPED "no torch with CUDA"
    return
  fi
  if ! fits 120; then
    for name in torch-gpu-job torch-after-window overhead; do row "$name" SKIPPED "time budget spent"; done
    return
  fi
  logged torch-base "$(step_limit 120)" "$PYTHON" "$model" "${job[@]}" --out "$LOGS/torch-base.json" &&
  logged torch-timing "$(step_limit 120)" env FLOPSCOPE_CUPTI_PATH="$CUPTI_FOR_TORCH" "$FS" run --torch --job torch-timing --socket "$SOCKET" -- \
    "$PYTHON" "$model" "${job[@]}" --out "$LOGS/torch-timing.json" &&
  logged torch-counted "$(step_limit 180)" env FLOPSCOPE_COUNTERS=steps=10:10 \
    FLOPSCOPE_CUPTI_PATH="$CUPTI_FOR_TORCH" "$FS" run --torch \
    --job torch-counted --socket "$SOCKET" -- "$PYTHON" "$model" "${job[@]}" --out "$LOGS/torch-counted.json"
  local status=$?
  logged torch-counted-report-text 60 "$FS" report torch-counted --socket "$SOCKET"
  json_logged torch-counted-report 60 "$FS" report torch-counted --socket "$SOCKET" --format json
  if ((status != 0)); then
    row torch-gpu-job FAIL "a torch run failed (exit $status): see logs/torch-*.log"
    row torch-after-window SKIPPED "a torch run failed"
    row overhead SKIPPED "a torch run failed"
    return
  fi
  if logged torch-report-check 30 "${CHECKS[@]}" torch-report "$LOGS/torch-counted-report.json" \
       "$LOGS/torch-counted.json"; then
    row torch-gpu-job PASS "$(last_line "$LOGS/torch-report-check.log")"
  else
    row torch-gpu-job FAIL "$(last_line "$LOGS/torch-report-check.log")"
  fi
  # The counted job's kernels after its window (on the H200, 2026-11-26, ~10 steps had none until
  # the tracer flushed CUPTI forced from the window on).
  if logged torch-after-window 30 "${CHECKS[@]}" post-window \
       "$DATA/jobs/torch-counted/rank-00000.sqlite" "$LOGS/torch-counted.log"; then
    row torch-after-window PASS "$(last_line "$LOGS/torch-after-window.log")"
  else
    row torch-after-window FAIL "$(last_line "$LOGS/torch-after-window.log")"
  fi
  if logged overhead 30 "${CHECKS[@]}" overhead "$LOGS/torch-base.json" "$LOGS/torch-timing.json" "$DATA/jobs/torch-counted/rank-00000.sqlite"; then
    row overhead PASS "$(last_line "$LOGS/overhead.log")"
  else
    row overhead FAIL "$(last_line "$LOGS/overhead.log")"
  fi
}

gpu_rows() {
  local chip cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  chip=$(checks chip "$cc")
  [[ -n "$chip" && "$chip" != GH100 ]] && check_counters_plan "$chip"
  if ! build_gpu_programs; then
    for name in "${GPU_ROWS[@]:1}"; do row "$name" SKIPPED "the GPU programs did not build"; done
    return
  fi
  run_gpu_test gpu-tests-kernels test_gpu_kernels.py 150
  run_gpu_test gpu-tests-flops test_gpu_flops.py 300
  compare_with_ncu "${chip:-GH100}"
  torch_gpu_jobs
}

# The rank files of the GPU jobs, consistent copies (SQLite's backup: the WAL folded in) under
# logs/ranks/, so that what a report showed can be looked into afterwards without a device
# (2026-11-26: the 30-step counted torch report had every module latency at 0 s, the 14-step one
# not; there was no file to find out why).
keep_rank_files() {
  [[ -n "${DATA:-}" && -d "$DATA/jobs" ]] || return 0
  mkdir -p "$LOGS/ranks"
  local job
  for job in flops torch-timing torch-counted; do
    [[ -f "$DATA/jobs/$job/rank-00000.sqlite" ]] || continue
    "$PYTHON" - "$DATA/jobs/$job/rank-00000.sqlite" "$LOGS/ranks/$job.sqlite" <<'EOF' \
      >> "$LOGS/ranks.log" 2>&1 || echo "could not copy $job's rank file" >> "$LOGS/ranks.log"
import sqlite3, sys
source = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
target = sqlite3.connect(sys.argv[2])
source.backup(target)
target.close()
EOF
  done
}

finish() {
  local well_formed=0
  keep_rank_files
  checks summary "$SUMMARY_TSV" > "$OUT/summary.txt" 2>&1 || well_formed=1
  {
    echo
    echo "elapsed: ${SECONDS} s of ${BUDGET_S} s; out: $OUT"
    [[ -d "$OUT/recording" ]] && echo "recording: $OUT/recording -> commit under tests/data/gpu/$(device_slug)/"
    [[ -s "$LOGS/device.csv" ]] && tail -n +2 "$LOGS/device.csv" | sed 's/^/device: /'
  } >> "$OUT/summary.txt"
  tar -C "$OUT" -czf "$WORK/acceptance.tar.gz" --exclude acceptance.tar.gz . && mv "$WORK/acceptance.tar.gz" "$OUT/"
  if [[ "${FLOPSCOPE_ACCEPTANCE_PACK_ONLY:-0}" == 1 ]]; then rm -rf "$LOGS" "$OUT/recording"; fi
  cat "$OUT/summary.txt"
  ((well_formed == 0)) && ! grep -q $'\tFAIL\t' "$SUMMARY_TSV"
}

main() {
  if check_bundle "$1"; then
    choose_cupti
    if start_daemon; then
      check_counters_plan GH100
      check_cpu_torch_job
      if gpu_present; then
        gpu_rows
      else
        for name in "${GPU_ROWS[@]}"; do row "$name" SKIPPED "$NO_GPU"; done
      fi
    fi
  fi
  if [[ -z "${SHARE:-}" || ! -f "$SHARE/tests/gpu/acceptance_checks.py" ]]; then
    SHARE=$(cd "$(dirname "$0")/../.." && pwd)  # the bundle did not unpack: the script's own tree
    CHECKS=("$PYTHON" "$SHARE/tests/gpu/acceptance_checks.py")
  fi
  finish
}

main "$1"
