# Sourced by the hand-run reliability scripts here (docs/reliability-rerun.md): BIN (the build's
# bin dir, default build/bin), R (this directory), B (the build dir) and start_daemon.
R=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${BIN:-$(cd "$R/../.." && pwd)/build/bin}
B=$(cd "$BIN/.." && pwd)
export BIN R B PATH=$BIN:$PATH
# start_daemon DIR [args]: flopscoped on DIR/s.sock with data DIR/data, log DIR/d.log and pid
# DIR/d.pid, collecting the spool DIR/spool every second; returns once it answers.
start_daemon() {
  local d=$1; shift
  mkdir -p "$d/spool"; chmod 700 "$d/spool"
  "$BIN/flopscoped" --data-dir "$d/data" --socket "$d/s.sock" --collect-spools "$d/spool" \
    --collect-spools-period-s 1 "$@" >>"$d/d.log" 2>&1 &
  echo $! >"$d/d.pid"
  for i in $(seq 100); do "$BIN/flopscope" jobs --socket "$d/s.sock" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "daemon did not start"; return 1
}
