#!/bin/bash
# load.sh DIR N STEPS: the campaign's row 4. N ranks of ranks.sh (transformer_nvtx, 25 range
# events a step) stream into one daemon (DIR/s.sock; spool DIR/spool, collected every second).
# While they run, the daemon's VmRSS and threads are sampled every 0.5 s and `ranks`, `report`
# and `jobs` are timed in turn (DIR/queries: name, rc, seconds, start in seconds after the
# job's). After the job: stored / expected, ranks short, unfinished sessions, losses, each
# query's median, 95th percentile and worst (and when its calls over 1 s started), the ranks'
# stderr lines, and how long the spooled records took to arrive.
# NICE=N runs the ranks niced; SETSID=1 in a session of their own; DAEMON_ARGS: more flopscoped flags.
# PROBE=1 also runs bench/query_latency beside (one client that stays connected, so its figures
# leave out the client's own process start) and prints its summary; `make bench` (or `ninja
# query_latency`) builds it. Needs BIN (the build's bin dir).
set -u
D=$1 N=$2 STEPS=$3
R=$(cd "$(dirname "$0")" && pwd)
JOB=$(basename "$D")
rm -rf "$D"; mkdir -p "$D/spool"; chmod 700 "$D/spool"
# SETSID=1 also runs the daemon in a session of its own, as systemd or a pod runs it apart from
# the shell the queries come from (with the kernel's autogroup scheduling, a daemon busy with 64
# streams in the queries' session starves the client processes themselves).
DAEMON_LAUNCH=(); [ "${SETSID:-0}" = 1 ] && DAEMON_LAUNCH=(setsid)
"${DAEMON_LAUNCH[@]}" "$BIN/flopscoped" --data-dir "$D/data" --socket "$D/s.sock" --collect-spools "$D/spool" \
  --collect-spools-period-s 1 ${DAEMON_ARGS:-} >"$D/d.log" 2>&1 &
DP=$!
for i in $(seq 100); do "$BIN/flopscope" jobs --socket "$D/s.sock" >/dev/null 2>&1 && break; sleep 0.1; done
load0=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s.%N)
# SETSID=1 starts the job in a session of its own, as torchrun or srun do: with the kernel's
# autogroup scheduling, ranks in the same session as the timed queries starve those queries.
LAUNCH=(); [ "${SETSID:-0}" = 1 ] && LAUNCH=(setsid -w)
FLOPSCOPE_SPOOL_DIR=$D/spool OUTDIR=$D/ranks "${LAUNCH[@]}" "$BIN/flopscope" run --job "$JOB" --socket "$D/s.sock" \
  -- "$R/ranks.sh" "$N" "$STEPS" >"$D/job.out" 2>"$D/job.err" &
JP=$!
if [ "${PROBE:-0}" = 1 ]; then
  "$BIN/../bench/query_latency" --socket "$D/s.sock" --job "$JOB" --duration-s 600 --period-ms 300 \
    >"$D/probe" 2>&1 &
  PP=$!
fi
( while kill -0 $JP 2>/dev/null; do
    awk '/VmRSS|Threads/ {printf "%s ", $2} END {print ""}' /proc/$DP/status >>"$D/rss"; sleep 0.5; done ) &
while kill -0 $JP 2>/dev/null; do
  for q in ranks report jobs; do
    if [ $q = jobs ]; then a=(jobs); else a=($q "$JOB"); fi
    # Bash's own clock: a `date` process to read the end would add its own start (up to 0.4 s
    # in the seconds the ranks start) to the figure.
    t0=$EPOCHREALTIME; "$BIN/flopscope" "${a[@]}" --socket "$D/s.sock" >/dev/null 2>"$D/q.err"; rc=$?
    t1=$EPOCHREALTIME
    [ $rc != 0 ] && sed "s/^/$q: /" "$D/q.err" >>"$D/query_errors"
    echo "$q $rc $(echo "$t1 - $t0" | bc) $(echo "$t0 - $start" | bc)" >>"$D/queries"
  done
  sleep 1
done
wait $JP; rc=$?
[ "${PROBE:-0}" = 1 ] && kill -INT $PP 2>/dev/null
end=$(date +%s.%N); load1=$(cut -d' ' -f1 /proc/loadavg)
at_end=$(python3 "$R/count.py" "$D/data" "$JOB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["committed"])')
for i in $(seq 1200); do ls "$D"/spool/*/*.spool >/dev/null 2>&1 || break; sleep 0.1; done
drained=$(echo "$(date +%s.%N) - $end" | bc)
python3 "$R/count.py" "$D/data" "$JOB" --json >"$D/count.json"
python3 - "$D" "$N" "$STEPS" <<'PY'
import json, sys, statistics
d, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = json.load(open(f"{d}/count.json"))
per = 25 * steps
short = [r for r, v in c["ranks"].items() if v["committed"] < per]
t = c["total"]
print(f"stored {t['committed']} of {n * per} ({100 * t['committed'] / (n * per):.1f} %), ranks with a file {t['ranks']}, "
      f"short {len(short)}, dup {t['dup_instance']}, not_final {t['not_final']}, losses {t['losses']}")
q = {}
for line in open(f"{d}/queries"):
    name, rc, s, at = line.split(); q.setdefault(name, []).append((int(rc), float(s), float(at)))
for name, v in q.items():
    ok = sorted(s for rc, s, _ in v if rc == 0)
    p95 = ok[int(len(ok) * 0.95)] if ok else 0
    slow = ", ".join(f"{s:.2f} s at {at:.0f} s" for rc, s, at in v if rc == 0 and s > 1)
    print(f"  {name}: {len(v)} calls, {len(v) - len(ok)} failed, median {statistics.median(ok) if ok else 0:.2f} s, "
          f"95th percentile {p95:.2f} s, max {max(ok) if ok else 0:.2f} s" + (f"; over 1 s: {slow}" if slow else ""))
rss = [l.split() for l in open(f"{d}/rss") if len(l.split()) == 2]
if rss:
    print(f"  daemon VmRSS max {max(int(r[0]) for r in rss) // 1024} MB, threads max {max(int(r[1]) for r in rss)}")
PY
echo "  job rc $rc, wall $(echo "$end - $start" | bc | cut -c1-5) s, stored at job end $at_end, spools drained $(echo $drained | cut -c1-5) s after (left: $(ls "$D"/spool/*/*.spool 2>/dev/null | wc -l)), load $load0 -> $load1"
[ -f "$D/query_errors" ] && sort "$D/query_errors" | uniq -c | sed 's/^/  failed query: /' | cut -c1-300
echo "  ranks' stderr: $(grep -l 'not delivered' "$D"/ranks/*.err 2>/dev/null | wc -l) 'not delivered', $(grep -l 'spooled' "$D"/ranks/*.err 2>/dev/null | wc -l) 'spooled'; jobs: $("$BIN/flopscope" jobs --socket "$D/s.sock" | awk -v j="$JOB" '$1==j {print "ranks "$2, "connected "$3, "ranges "$4, "lost "$6}')"
[ "${PROBE:-0}" = 1 ] && { wait $PP; grep -E '^(ranks|report) ' "$D/probe" | sed 's/^/  probe: /'; }
kill $DP
