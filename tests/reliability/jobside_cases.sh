#!/bin/bash
# jobside_cases.sh [DIR]: the campaign's row 8 (docs/reliability-rerun.md): exec, _exit and
# SIGTERM'd pools (jobside.py through libflopscope_torch_nvtx.so), many threads and signals
# (threads.cc, built here), each without and with the injector (case.sh).
. "$(dirname "$0")/common.sh"
D=${1:-/tmp/campaign/t8}; rm -rf $D; mkdir -p $D; start_daemon $D
SHIM=$B/lib/libflopscope_torch_nvtx.so; export NVTX_MINIMAL=$BIN/nvtx_minimal
PY=/usr/bin/python3; J=$R/jobside.py; T=$D/threads; g++ -O2 -std=c++17 -I/usr/local/cuda/include $R/threads.cc -o $T -lpthread
uptime
$R/case.sh $D exec 1060 $PY $J $SHIM exec 1000
$R/case.sh $D exit 100000 $PY $J $SHIM exit 100000
$R/case.sh $D spawn 10000 $PY $J $SHIM spawn 2000
$R/case.sh $D forkserver 10000 $PY $J $SHIM forkserver 2000
$R/case.sh $D spawnjoin 10000 $PY $J $SHIM spawn-join 2000
$R/case.sh $D threads500 1000000 $T 500 2000
$R/case.sh $D threads2000 1000000 $T 2000 500
$R/case.sh $D thread1 1000000 $T 1 1000000
uptime
# a 4-thread pusher killed by a signal at 2 s (SIGKILL is the wal helper's: recorded only)
# (SIGINT is not tried: a background job of a non-interactive shell ignores it.)
for sig in KILL TERM; do
  FLOPSCOPE_SPOOL_DIR=$D/spool flopscope run --job sig$sig --socket $D/s.sock -- $T 4 0 > $D/sig$sig.out 2> $D/sig$sig.err & P=$!
  sleep 2; kill -$sig $P; wait $P; rc=$?
  for i in $(seq 100); do ls $D/spool/*/*.spool >/dev/null 2>&1 || break; sleep 0.1; done
  echo "sig$sig rc $rc store: $(python3 $R/count.py $D/data sig$sig | tail -1) stderr: $(grep -v 'no CUDA' $D/sig$sig.err | tr '\n' '|')"
  flopscope jobs --socket $D/s.sock | awk -v j=sig$sig '$1==j'
done
flopscope report sigKILL --socket $D/s.sock --format json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("report sigKILL:", r["losses"], "sessions_without_final", r["sessions_without_final"])'
kill $(cat $D/d.pid)
