#!/bin/bash
# ranks.sh N STEPS: N ranks of transformer_nvtx (the campaign's shape: --hidden 16 --batch 1
# --seq 8 --vocab 64, 2 layers, loader thread: 25 range events per step) with RANK, LOCAL_RANK and
# WORLD_SIZE set, each rank's stdout/stderr in $OUTDIR/rank-R.{out,err} (default: .). Run it under
# `flopscope run` so that every rank is injected. NICE=N runs the ranks at that nice level.
# BIN: the build's bin dir (default: build/bin beside this script's repository).
set -u
N=$1 STEPS=$2
BIN=${BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}
OUTDIR=${OUTDIR:-.}
mkdir -p "$OUTDIR"
pids=()
for ((r = 0; r < N; r++)); do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$N nice -n "${NICE:-0}" "$BIN/transformer_nvtx" \
    --steps "$STEPS" --hidden 16 --batch 1 --seq 8 --vocab 64 \
    >"$OUTDIR/rank-$r.out" 2>"$OUTDIR/rank-$r.err" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
