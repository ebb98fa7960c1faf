#!/bin/bash
# corrupt.sh DIR CASE: the campaign's row 6. DIR/base holds a stopped daemon's data dir with jobs A
# (2 ranks), B (2 ranks) and C (nvtx_minimal) -- made by `corrupt.sh DIR setup`. CASE damages a copy
# (rank 1 of A, or the catalog), starts a daemon on it and probes: start, startup log, jobs,
# ranks A, report A, report A --rank 0, report B, a new run of A (2 ranks) and a new job D.
# Needs BIN (the build's bin dir).
set -u
D=$1 CASE=$2
R=$(cd "$(dirname "$0")" && pwd)
q() { timeout 60 "$BIN/flopscope" "$@" --socket "$W/s.sock" 2>&1; }
serve() {
  "$BIN/flopscoped" --data-dir "$W/data" --socket "$W/s.sock" --collect-spools >>"$W/d.log" 2>&1 &
  echo $! >"$W/d.pid"
  for i in $(seq 100); do "$BIN/flopscope" jobs --socket "$W/s.sock" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$W/d.pid")" 2>/dev/null || return 1; sleep 0.1; done; return 1
}
run() { # JOB N STEPS [run args]
  local job=$1 n=$2 steps=$3; shift 3
  FLOPSCOPE_SPOOL_DIR=$W/spool OUTDIR=$W/ranks-$job BIN=$BIN \
    "$BIN/flopscope" run --job "$job" --socket "$W/s.sock" "$@" -- "$R/ranks.sh" "$n" "$steps" >/dev/null 2>&1
}
if [ "$CASE" = setup ]; then
  W=$D/base; rm -rf "$W"; mkdir -p "$W/spool"; chmod 700 "$W/spool"; serve || exit 1
  run A 2 2000; run B 2 200
  FLOPSCOPE_SPOOL_DIR=$W/spool "$BIN/flopscope" run --job C --socket "$W/s.sock" -- "$BIN/nvtx_minimal" --repeat 10 >/dev/null 2>&1
  kill "$(cat "$W/d.pid")"; while kill -0 "$(cat "$W/d.pid")" 2>/dev/null; do sleep 0.1; done
  exit 0
fi
W=$D/$CASE; rm -rf "$W"; mkdir -p "$W/spool"; chmod 700 "$W/spool"; cp -a "$D/base/data" "$W/data"
F=$W/data/jobs/A/rank-00001.sqlite CAT=$W/data/catalog.sqlite
case $CASE in
  header) printf 'this is no sqlite header at all' | dd of="$F" conv=notrunc 2>/dev/null ;;
  truncated) truncate -s $(( $(stat -c %s "$F") / 2 )) "$F" ;;
  zero) : >"$F" ;;
  pages) python3 -c "
import random,sys; f=open('$F','r+b'); n=f.seek(0,2); random.seed(6)
for _ in range(40):
    f.seek(random.randrange(4096, n - 64)); f.write(bytes(random.randrange(256) for _ in range(64)))" ;;
  directory) rm "$F"; mkdir "$F" ;;
  module_stats) sqlite3 "$F" 'DROP TABLE module_stats' ;;
  schema99) sqlite3 "$F" 'UPDATE schema_version SET version = 99' ;;
  wal) head -c 8192 /dev/urandom >"$F-wal" ;;
  symlink) rm "$F"; ln -s /etc/passwd "$F" ;;
  catalog_header) printf 'this is no sqlite header at all' | dd of="$CAT" conv=notrunc 2>/dev/null ;;
  catalog_deleted) rm -f "$CAT" "$CAT-wal" "$CAT-shm" ;;
esac
if serve; then started=yes; else started=no; fi
echo "== $CASE: daemon starts: $started"
grep -v '^$' "$W/d.log" | grep -iv 'no group\|serving unix' | sed 's/^/  log: /' | head -6
[ $started = no ] && exit 0
echo "  jobs: $(q jobs | awk 'NR>2 {printf "%s(ranks %s, ranges %s) ", $1, $2, $4}')"
for c in "ranks A" "report A" "report A --rank 0" "report B" "report C"; do
  out=$(q $c); rc=$?; echo "  $c: rc $rc; $(echo "$out" | grep -i 'unreadable\|damaged\|error\|malformed\|not a\|cannot\|rank 1' | head -2 | tr '\n' ' ' | cut -c1-300)"
done
run A 2 100 --append; echo "  new run of A: rc $?; rank 1 stderr: $(grep -hv 'no GPU\|no CUDA' "$W"/ranks-A/rank-1.err | head -2 | tr '\n' ' ' | cut -c1-200)"
echo "  A's files now: $(ls "$W/data/jobs/A" | tr '\n' ' ')"
echo "  report A after the new run: $(q report A --format json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("ranks", len(r.get("ranks",[])), "unreadable", r.get("unreadable_ranks"))' 2>&1 | cut -c1-300)"
run D 1 50; echo "  new job D: rc $?, $(q jobs | awk '$1=="D" {print "ranges " $4}')"
kill "$(cat "$W/d.pid")"
