#!/bin/bash
# kill_restart.sh DIR STEPS NRANKS KILL_AT GAP WAIT [KILL_AT2 GAP2]
# The campaign's rows 1a-1c: NRANKS ranks of ranks.sh stream into a daemon; KILL_AT s after the
# job starts the daemon gets kill -9, then (WAIT=1) its pid is waited for, or (WAIT=0) not, GAP s
# pass and a daemon is started again on the same data dir and socket. Prints one summary line:
# stored/expected, duplicates, unfinished sessions, stored losses, what `jobs` says, the ranks'
# "not delivered" lines, whether the restart was refused, and the wall time. Spooled records are
# left to the daemon's collector (period 1 s) and counted after the spool dir empties (60 s max).
# SIG=TERM stops the daemon gracefully instead (stop_s: how long the old daemon took to exit).
# Needs BIN (the build's bin dir). Ranks use DIR/spool as FLOPSCOPE_SPOOL_DIR.
set -u
D=$1 STEPS=$2 N=$3 KILL_AT=$4 GAP=$5 WAIT=$6 KILL_AT2=${7:-} GAP2=${8:-}
R=$(cd "$(dirname "$0")" && pwd)
JOB=$(basename "$D")
rm -rf "$D"; mkdir -p "$D/spool"; chmod 700 "$D/spool"
daemon() {
  "$BIN/flopscoped" --data-dir "$D/data" --socket "$D/s.sock" --keep-raw-steps 0 \
    --collect-spools "$D/spool" --collect-spools-period-s 1 >>"$D/d.log" 2>&1 &
  echo $! >"$D/d.pid"
}
ready() { for i in $(seq 100); do "$BIN/flopscope" jobs --socket "$D/s.sock" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
kill_restart() {  # $1 kill at (s after start), $2 gap
  sleep "$1"; local old t0; old=$(cat "$D/d.pid"); t0=$(date +%s.%N); kill -"${SIG:-9}" "$old"
  if [ "$WAIT" = 1 ]; then while kill -0 "$old" 2>/dev/null && [ "$(ps -o stat= -p "$old")" != Z ]; do sleep 0.01; done; fi
  echo "$(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5)" >>"$D/stop_s"
  sleep "$2"; echo "$(ps -o stat= -p "$old" | tr -d ' ' | grep . || echo gone)" >>"$D/old_state"; daemon; local new; new=$(cat "$D/d.pid"); date +%s.%N >"$D/restarted_at"
  sleep 1.5; if ! kill -0 "$new" 2>/dev/null; then echo "REFUSED old=$(ps -o stat= -p "$old" | tr -d ' ')" >>"$D/refused"; fi
}
daemon; ready || { echo "first daemon did not start"; exit 1; }
export FLOPSCOPE_SPOOL_DIR=$D/spool
start=$(date +%s.%N)
( kill_restart "$KILL_AT" "$GAP"; if [ -n "$KILL_AT2" ]; then kill_restart "$KILL_AT2" "$GAP2"; fi ) &
killer=$!
OUTDIR=$D/ranks "$BIN/flopscope" run --job "$JOB" --socket "$D/s.sock" -- "$R/ranks.sh" "$N" "$STEPS" >"$D/job.out" 2>"$D/job.err"
rc=$?
end=$(date +%s.%N); wall=$(echo "$end - $start" | bc)
wait $killer
after=$(echo "$end - $(cat "$D/restarted_at" 2>/dev/null || echo "$end")" | bc)
ready || echo "no daemon serving after the job"
at_end=$(python3 "$R/count.py" "$D/data" "$JOB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["committed"])')
for i in $(seq 600); do ls "$D"/spool/*/*.spool >/dev/null 2>&1 || break; sleep 0.1; done
spools_left=$(ls "$D"/spool/*/*.spool 2>/dev/null | wc -l)
total=$(python3 "$R/count.py" "$D/data" "$JOB" --json | python3 -c 'import json,sys; t=json.load(sys.stdin)["total"]; print(t["committed"], t["dup_instance"], t["dup_content"], t["not_final"], json.dumps(t["losses"]).replace(" ",""))')
jobs_lost=$("$BIN/flopscope" jobs --socket "$D/s.sock" | awk -v j="$JOB" '$1==j {print "ranges="$4, "lost="$6}')
nd=$(grep -h "not delivered" "$D"/ranks/*.err 2>/dev/null | sed 's/flopscope: //' | tr '\n' '|')
sp=$(grep -hc "spool" "$D"/ranks/*.err 2>/dev/null | paste -sd+ | bc)
set -- $total
echo "$JOB expected=$((N * STEPS * 25)) at_job_end=$at_end stored=$1 dup_inst=$2 dup_content=$3 not_final=$4 losses=$5 spools_left=$spools_left jobs:[$jobs_lost] rc=$rc wall=${wall}s job_end_after_last_restart=${after}s stop_s=[$(cat "$D/stop_s" 2>/dev/null | tr '\n' ' ')] old_pid_at_restart=[$(cat "$D/old_state" 2>/dev/null | tr '\n' ' ')] refused=[$(cat "$D/refused" 2>/dev/null | tr '\n' ' ')] rank_lines_with_spool=$sp not_delivered=[$nd]"
kill "$(cat "$D/d.pid")" 2>/dev/null
