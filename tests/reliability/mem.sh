#!/bin/bash
# mem.sh DIR BUFFER_MB STEPS [noinject]: the campaign's row 2e. One rank of transformer_nvtx (the
# campaign's shape) with no daemon listening (FLOPSCOPE_SOCKET points at nothing), spool in
# DIR/spool; VmRSS sampled every 0.5 s. Prints the peak, the RSS at 3/6/9 s and the rank's stderr
# (the exit line). "noinject": the same program without the injector (the baseline).
# Needs BIN (the build's bin dir); the injector is $BIN/../lib/libflopscope_inject.so.
set -u
D=$1 BUF=$2 STEPS=$3 MODE=${4:-inject}
rm -rf "$D"; mkdir -p "$D/spool"; chmod 700 "$D/spool"
if [ "$MODE" = noinject ]; then PRE=; else PRE=$BIN/../lib/libflopscope_inject.so; fi
FLOPSCOPE_BUFFER_MB=$BUF FLOPSCOPE_JOB_ID=$(basename "$D") RANK=0 WORLD_SIZE=1 \
  FLOPSCOPE_SOCKET=$D/none.sock FLOPSCOPE_SPOOL_DIR=$D/spool LD_PRELOAD=$PRE \
  "$BIN/transformer_nvtx" --steps "$STEPS" --hidden 16 --batch 1 --seq 8 --vocab 64 \
  >"$D/out" 2>"$D/err" &
P=$!
peak=0 t=0 at=""
while kill -0 $P 2>/dev/null; do
  kb=$(awk '/VmRSS/ {print $2}' /proc/$P/status 2>/dev/null); kb=${kb:-0}
  [ "$kb" -gt "$peak" ] && peak=$kb
  case $t in 6|12|18) at="$at $((kb / 1024))MB@$((t / 2))s" ;; esac
  t=$((t + 1)); sleep 0.5
done
wait $P; rc=$?
echo "$(basename "$D") buffer_mb=$BUF steps=$STEPS mode=$MODE rc=$rc peak_rss=$((peak / 1024))MB samples:$at wall~$((t / 2))s spool=$(du -sm "$D/spool" | cut -f1)MB"
grep -v 'no GPU\|no CUDA' "$D/err" | sed 's/^/  stderr: /'
