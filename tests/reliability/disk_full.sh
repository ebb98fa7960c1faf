#!/bin/bash
# disk_full.sh [DIR]: the campaign's row 5 (docs/reliability-rerun.md). Mounts a 2 MB tmpfs as
# the data dir of a daemon, runs 2 ranks x 20 000 steps (1 000 000 range events) into it, shows
# what the ranks, the log, the store and the catalog say, grows the tmpfs to 64 MB and waits for
# the spooled records; then starts a daemon on a full disk. Root (mount). Default DIR
# /tmp/campaign/t5.
. "$(dirname "$0")/common.sh"
D=${1:-/tmp/campaign/t5}; umount $D/data 2>/dev/null; rm -rf $D; mkdir -p $D/data; mount -t tmpfs -o size=2m tmpfs $D/data
start_daemon $D; export FLOPSCOPE_SPOOL_DIR=$D/spool
uptime
/usr/bin/time -f "job wall %e s" flopscope run --job full1 --socket $D/s.sock -- env OUTDIR=$D/ranks BIN=$BIN $R/ranks.sh 2 20000 > $D/job.out 2> $D/job.err; echo "job rc $?"; cat $D/job.err
for f in $D/ranks/*.err; do echo "$f: $(grep -v 'no GPU\|no CUDA' $f)"; done
echo "--- daemon alive: $(kill -0 $(cat $D/d.pid) && echo yes)"; grep -v '^$' $D/d.log | sort | uniq -c | sort -rn | head -12
echo "--- df"; df -k $D/data | tail -1
echo "--- store"; python3 $R/count.py $D/data full1 | tail -1
flopscope jobs --socket $D/s.sock
flopscope ranks full1 --socket $D/s.sock
echo "--- spool files: $(ls $D/spool | wc -l) ($(du -sh $D/spool | cut -f1))"
mount -o remount,size=64m $D/data; echo "--- remounted 64m at $(date +%T)"
for i in $(seq 120); do ls $D/spool/*/*.spool >/dev/null 2>&1 || break; sleep 0.5; done; echo "spool empty after ~$((i/2)) s at $(date +%T): $(ls $D/spool | wc -l) files"
python3 $R/count.py $D/data full1 | tail -1
flopscope jobs --socket $D/s.sock
flopscope report full1 --socket $D/s.sock --format json | python3 -c 'import json,sys; r=json.load(sys.stdin); print({k: r.get(k) for k in ("lost","losses","sessions_without_final","rejected") if k in r})'
P0=$(cat $D/d.pid); kill $P0; while kill -0 $P0 2>/dev/null; do sleep 0.1; done
echo "--- daemon started on a full disk"
dd if=/dev/zero of=$D/data/fill bs=1k count=100000 2>/dev/null; mount -o remount,size=$(( $(du -k -s $D/data | cut -f1) + 16 ))k $D/data; df -k $D/data | tail -1
$BIN/flopscoped --data-dir $D/data --socket $D/s2.sock --collect-spools > $D/full-start.log 2>&1 & P=$!; sleep 3; echo "alive: $(kill -0 $P 2>/dev/null && echo yes || echo no)"; cat $D/full-start.log | head -5
flopscope jobs --socket $D/s2.sock; kill $P 2>/dev/null; wait $P; echo "rc $?"
umount $D/data
