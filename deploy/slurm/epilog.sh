#!/bin/bash
# Slurm Epilog: stops this job's flopscoped on this node once the job has ended.
# slurm.conf: Epilog=/etc/slurm/epilog.sh.
#
# SIGTERM lets the daemon drain open streams, forward what still waits for the aggregator (for up
# to forward_timeout_s, when `upstream` is set) and checkpoint every SQLite file; it is killed
# only after stop_timeout_s. The socket directory goes (with the certificate copies the prolog put
# there); the data stays in $data_root/<node>/job-<job id>/ (read it with `flopscoped --data-dir
# DIR --socket S &` and `flopscope report JOB.STEP --socket S`, or ask the aggregator for the
# whole job). Always exits 0: a failing Epilog drains the node.
set -u
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=flopscope-slurm.conf
. "$here/flopscope-slurm.conf"

node=${SLURMD_NODENAME:-$(hostname -s)}
run_dir="$run_root/$node/job-${SLURM_JOB_ID:?Slurm sets SLURM_JOB_ID}"
pid_file="$run_dir/flopscoped.pid"
[[ -f "$pid_file" ]] || exit 0

# Running, and not a zombie: the daemon is no child of ours, and its exit is only reaped by
# whoever adopted it.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "${stat##*) }" != Z* ]]
}

pid=$(cat "$pid_file")
# Only our daemon: the pid must still be a flopscoped (pids are reused).
if [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == flopscoped ]] && alive "$pid"; then
  kill -TERM "$pid"
  deadline=$((SECONDS + stop_timeout_s))
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  if alive "$pid"; then
    echo "flopscope epilog: job $SLURM_JOB_ID on $node: flopscoped ignored SIGTERM for" \
         "${stop_timeout_s}s; killing it" >&2
    kill -KILL "$pid"
  fi
fi
rm -rf -- "$run_dir"
exit 0
