#!/bin/bash
# case.sh DIR NAME EXPECTED CMD...: the campaign's row 8. Runs CMD without the injector, then under
# `flopscope run --job NAME` on the daemon of DIR (DIR/s.sock, data DIR/data, spool DIR/spool,
# collected every second), and prints one line: exit codes, whether stdout matched, wall times,
# what the store holds (range events, unfinished sessions, losses by cause) against EXPECTED, and
# what the job said on stderr. Needs BIN (the build's bin dir).
set -u
D=$1 NAME=$2 EXPECTED=$3; shift 3
R=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s.%N); "$@" >"$D/$NAME.plain.out" 2>/dev/null; rc0=$?; t1=$(date +%s.%N)
FLOPSCOPE_SPOOL_DIR=$D/spool "$BIN/flopscope" run --job "$NAME" --socket "$D/s.sock" -- "$@" \
  >"$D/$NAME.out" 2>"$D/$NAME.err"; rc1=$?; t2=$(date +%s.%N)
for i in $(seq 100); do ls "$D"/spool/*/*.spool >/dev/null 2>&1 || break; sleep 0.1; done
same=$(cmp -s "$D/$NAME.plain.out" "$D/$NAME.out" && echo same || echo DIFFERENT)
store=$(python3 "$R/count.py" "$D/data" "$NAME" --json 2>/dev/null | python3 -c '
import json,sys; t=json.load(sys.stdin)["total"]; print(t["committed"], "not_final=%d" % t["not_final"], "sessions=%d" % t["sessions"], json.dumps(t["losses"]).replace(" ",""))' 2>/dev/null || echo "0 (no rank file)")
err=$(grep -v 'no GPU\|no CUDA\|^$' "$D/$NAME.err" | sed 's/flopscope: //' | cut -c1-160 | tr '\n' '|')
printf '%s rc %s/%s stdout %s wall %.2f->%.2f s stored %s of %s spools_left=%s stderr=[%s]\n' "$NAME" "$rc0" "$rc1" \
  "$same" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$store" "$EXPECTED" "$(ls "$D"/spool/*/*.spool 2>/dev/null | wc -l)" "$err"
